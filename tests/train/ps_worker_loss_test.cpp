// Workers of an asynchronous or bounded parameter-server run killed, frozen
// or lost one too many: real processes, through the binary. The shards log
// every push they apply (DTRAIN_TEST_PS_APPLIED_LOG), so the test sees that
// each worker's slice of each global batch was used exactly once, the lost
// worker's by whoever took it over.
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

constexpr int kWorkers = 3;
constexpr int kEpochs = 10;
constexpr int kBatchesPerEpoch = 21;  // 1000 samples in batches of 48

std::string lossJob(const TempDir& dir, const std::string& consistency, int min_workers = 1) {
  return oneThread(smallJob(dir / "run",
                            "[strategy]\ntype = \"parameter_server\"\nworkers = 3\nps = 1\n"
                            "consistency = \"" +
                                consistency + "\"\nmin_workers = " + std::to_string(min_workers) + "\n"));
}

// A run started with worker 1 slowed (so it is still running when it is
// lost) and the shards' log of applied pushes in `dir`/applied.shard0, once
// it has written 2 checkpoints: the host dtrain and its processes (3
// workers, then the shard).
struct StartedRun {
  pid_t host = -1;
  std::vector<pid_t> processes;
};

StartedRun startRun(const TempDir& dir) {
  const std::string applied = dir / "applied";
  StartedRun run;
  run.host = startDtrain({"train", dir / "job.toml", "--set", "train.epochs=" + std::to_string(kEpochs)},
                         dir / "log", [applied] {
                           ::setenv("DTRAIN_TEST_PS_APPLIED_LOG", applied.c_str(), 1);
                           ::setenv("DTRAIN_TEST_SLOW_WORKER", "1:40", 1);
                         });
  REQUIRE(waitFor([&] { return stepDirs(dir / "run").size() >= 2; }, 60));
  run.processes = workersOf(run.host);
  REQUIRE(run.processes.size() == 4);
  return run;
}

// How many times each (global batch, slice) was applied (lines "WORKER BATCH SLICE SECONDS").
std::map<std::pair<int64_t, int>, int> appliedSlices(const std::string& path) {
  std::map<std::pair<int64_t, int>, int> out;
  std::ifstream in(path);
  int worker = 0, slice = 0;
  int64_t batch = 0;
  double seconds = 0;
  while (in >> worker >> batch >> slice >> seconds) ++out[{batch, slice}];
  return out;
}

void checkEverySliceOnce(const std::string& path) {
  const auto applied = appliedSlices(path);
  CHECK(applied.size() == static_cast<size_t>(kWorkers * kEpochs * kBatchesPerEpoch));
  int wrong = 0;
  for (int64_t b = 0; b < kEpochs * kBatchesPerEpoch; ++b)
    for (int s = 0; s < kWorkers; ++s) {
      auto it = applied.find({b, s});
      if (it == applied.end() || it->second != 1) ++wrong;
    }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE(
    "parameter_server: a worker killed in async and bounded mode: the others finish, every sample once") {
  for (const char* consistency : {"async", "bounded"}) {
    CAPTURE(consistency);
    TempDir dir(std::string("ps_worker_kill_") + consistency);
    writeFile(dir / "job.toml", lossJob(dir, consistency));
    const StartedRun run = startRun(dir);
    const std::vector<pid_t>& processes = run.processes;
    ::kill(processes[1], SIGKILL);
    const int code = waitExit(run.host);
    const std::string log = readFile(dir / "log");
    INFO(log);
    CHECK(code == 0);
    CHECK(log.find("rank 1 (node 0, slot 1) (pid " + std::to_string(processes[1]) +
                   ") was killed by signal 9 (SIGKILL); the run goes on without it") != std::string::npos);
    CHECK(log.find("parameter server: lost worker 1 (host ") != std::string::npos);
    checkEverySliceOnce(dir / "applied.shard0");
    // The end checkpoint holds every applied update and evaluates.
    CHECK(runDtrain({"eval", dir / "run/checkpoints/latest"}).exit_code == 0);
  }
}

TEST_CASE("parameter_server: a frozen worker is dropped after the heartbeat timeout and the run finishes") {
  TempDir dir("ps_worker_frozen");
  writeFile(dir / "job.toml", lossJob(dir, "bounded"));
  const StartedRun run = startRun(dir);
  const std::vector<pid_t>& processes = run.processes;
  ::kill(processes[1], SIGSTOP);
  const int code = waitExit(run.host);
  const std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code == 0);
  CHECK(log.find("lost rank 1 (host ") != std::string::npos);
  CHECK(log.find("no heartbeat for 10.0 s; the run goes on without it") != std::string::npos);
  CHECK(::kill(processes[1], 0) == -1);  // ended by its host, not left frozen
  checkEverySliceOnce(dir / "applied.shard0");
}

TEST_CASE("parameter_server: a loss below min_workers stops the run and keeps the latest checkpoint") {
  TempDir dir("ps_worker_min");
  writeFile(dir / "job.toml", lossJob(dir, "async", /*min_workers=*/3));
  const StartedRun run = startRun(dir);
  const std::vector<pid_t>& processes = run.processes;
  ::kill(processes[1], SIGKILL);
  const int code = waitExit(run.host);
  const std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code != 0);
  CHECK(log.find("as many as [strategy] min_workers allows") != std::string::npos);
  // The latest checkpoint is complete: the run resumes from it.
  const std::vector<std::string> steps = stepDirs(dir / "run");
  REQUIRE(!steps.empty());
  const int64_t last = std::stoll(steps.back().substr(5));
  const RunResult resumed =
      runDtrain({"resume", dir / "run", "-q", "--set", "train.steps=" + std::to_string(last + 3)});
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
}
