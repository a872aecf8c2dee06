// Workers of a parameter-server run killed, frozen or lost one too many:
// real processes, through the binary. The shards log every push they apply
// (DTRAIN_TEST_PS_APPLIED_LOG), so the test sees that each worker's slice of
// each global batch was used exactly once, the lost worker's by whoever took
// it over. A synchronous run that loses a worker is the same training as one
// that does not.
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "core/io/json.h"
#include "tests/train/run_helpers.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

constexpr int kWorkers = 3;
constexpr int kEpochs = 10;
constexpr int kBatchesPerEpoch = 21;  // 1000 samples in batches of 48

std::string lossJob(const TempDir& dir, const std::string& consistency, int min_workers = 1, int ps = 1,
                    const std::string& run = "run") {
  return oneThread(smallJob(dir / run, "[strategy]\ntype = \"parameter_server\"\nworkers = 3\nps = " +
                                           std::to_string(ps) + "\nconsistency = \"" + consistency +
                                           "\"\nmin_workers = " + std::to_string(min_workers) + "\n"));
}

// Runs `job` (written to `dir`/job.toml) with worker 1 slowed, so it is
// still running when it is lost, and the shards' log of applied pushes in
// `dir`/applied.shardS; once it has written 2 checkpoints, sends worker 1
// `signal` and waits for the run to end. `shards`: the job's ps.
struct LostRun {
  int code = -1;
  std::string log;
  pid_t victim = -1;
};

LostRun runLosingWorker1(const TempDir& dir, const std::string& job, int signal, int shards = 1) {
  writeFile(dir / "job.toml", job);
  const std::string applied = dir / "applied";
  const pid_t host =
      startDtrain({"train", dir / "job.toml", "--set", "train.epochs=" + std::to_string(kEpochs)},
                  dir / "log", [applied] {
                    ::setenv("DTRAIN_TEST_PS_APPLIED_LOG", applied.c_str(), 1);
                    ::setenv("DTRAIN_TEST_SLOW_WORKER", "1:40", 1);
                  });
  REQUIRE(waitFor([&] { return stepDirs(dir / "run").size() >= 2; }, 60));
  const std::vector<pid_t> processes = workersOf(host);  // the workers, then the shards
  REQUIRE(processes.size() == static_cast<size_t>(kWorkers + shards));
  LostRun run;
  run.victim = processes[1];
  ::kill(run.victim, signal);
  run.code = waitExit(host);
  run.log = readFile(dir / "log");
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

// metrics.jsonl's lines of training steps, in order.
std::vector<JsonValue> trainLines(const std::string& path) {
  std::vector<JsonValue> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    JsonValue v = parseJson(line);
    if (v.find("split")->asString() == "train") out.push_back(std::move(v));
  }
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
    const LostRun run = runLosingWorker1(dir, lossJob(dir, consistency), SIGKILL);
    const std::string& log = run.log;
    INFO(log);
    CHECK(run.code == 0);
    CHECK(log.find("rank 1 (node 0, slot 1) (pid " + std::to_string(run.victim) +
                   ") was killed by signal 9 (SIGKILL); the run goes on without it") != std::string::npos);
    CHECK(log.find("parameter server: lost worker 1 (host ") != std::string::npos);
    checkEverySliceOnce(dir / "applied.shard0");
    // The end checkpoint holds every applied update and evaluates.
    CHECK(runDtrain({"eval", dir / "run/checkpoints/latest"}).exit_code == 0);
  }
}

TEST_CASE(
    "parameter_server: a worker killed in sync mode: the survivors compute its slices, the same training as "
    "without the loss") {
  TempDir dir("ps_worker_kill_sync");
  const std::string steps = "train.steps=" + std::to_string(kEpochs * kBatchesPerEpoch);
  writeFile(dir / "straight.toml", lossJob(dir, "sync", 1, 2, "straight"));
  const RunResult straight = runDtrain({"train", dir / "straight.toml", "-q", "--set", steps});
  REQUIRE(straight.exit_code == 0);
  const LostRun run = runLosingWorker1(dir, lossJob(dir, "sync", 1, 2), SIGKILL, 2);
  const std::string& log = run.log;
  INFO(log);
  CHECK(run.code == 0);
  CHECK(log.find("parameter server: lost worker 1 (host ") != std::string::npos);
  CHECK(log.find("2 workers compute its slices from there on (the global batch stays 48)") !=
        std::string::npos);
  // Every slice of every update on both shards once, whoever pushed it.
  checkEverySliceOnce(dir / "applied.shard0");
  checkEverySliceOnce(dir / "applied.shard1");
  // Each step logged once, with every sample of its global batch and the
  // loss the run that lost nobody logged.
  const std::vector<JsonValue> lost = trainLines(dir / "run/metrics.jsonl");
  const std::vector<JsonValue> whole = trainLines(dir / "straight/metrics.jsonl");
  REQUIRE(lost.size() == static_cast<size_t>(kEpochs * kBatchesPerEpoch));
  REQUIRE(whole.size() == lost.size());
  int differ = 0;
  for (size_t i = 0; i < lost.size(); ++i)
    if (lost[i].find("step")->asInt64() != static_cast<int64_t>(i + 1) ||
        lost[i].find("samples")->asInt64() != whole[i].find("samples")->asInt64() ||
        std::fabs(lost[i].find("loss")->asDouble() - whole[i].find("loss")->asDouble()) > 1e-5)
      ++differ;
  CHECK(differ == 0);
  // The same weights and optimizer state as the run that lost nobody.
  const std::string latest_run = dir / "run/checkpoints/latest";
  const std::string latest_straight = dir / "straight/checkpoints/latest";
  CHECK(checkpointDifference(latest_run, latest_straight, "model.safetensors") <= 1e-5);
  CHECK(checkpointDifference(latest_run, latest_straight, "optimizer.safetensors") <= 1e-5);
}

TEST_CASE("parameter_server: a frozen worker is dropped after the heartbeat timeout and the run finishes") {
  for (const char* consistency : {"bounded", "sync"}) {
    CAPTURE(consistency);
    TempDir dir(std::string("ps_worker_frozen_") + consistency);
    const LostRun run = runLosingWorker1(dir, lossJob(dir, consistency), SIGSTOP);
    const std::string& log = run.log;
    INFO(log);
    CHECK(run.code == 0);
    CHECK(log.find("lost rank 1 (host ") != std::string::npos);
    CHECK(log.find("no heartbeat for 10.0 s; the run goes on without it") != std::string::npos);
    CHECK(::kill(run.victim, 0) == -1);  // ended by its host, not left frozen
    checkEverySliceOnce(dir / "applied.shard0");
  }
}

TEST_CASE("parameter_server: a loss below min_workers stops the run and keeps the latest checkpoint") {
  for (const char* consistency : {"async", "sync"}) {
    CAPTURE(consistency);
    TempDir dir(std::string("ps_worker_min_") + consistency);
    const LostRun run = runLosingWorker1(dir, lossJob(dir, consistency, /*min_workers=*/3), SIGKILL);
    const std::string& log = run.log;
    INFO(log);
    CHECK(run.code != 0);
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
}
