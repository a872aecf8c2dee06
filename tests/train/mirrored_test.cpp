// Multi-process data parallelism through the binary: N worker processes
// compute what one process computes with the same global batch, and a dead
// worker stops the whole run quickly with a line naming it.
#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <vector>

#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// The small job with one compute thread per process.
std::string mirrored(int workers) {
  return "[strategy]\ntype = \"mirrored\"\nworkers = " + std::to_string(workers) + "\n";
}

// Whether a process ignores SIGPIPE: a worker writing to the socket of a dead
// peer must get EPIPE and report the peer, not die of the signal itself.
bool ignoresSigpipe(pid_t pid) {
  std::istringstream status(readFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("SigIgn:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGPIPE - 1)) & 1;
  return false;
}

}  // namespace

TEST_CASE("mirrored: 2 workers x 1 thread = 1 process x 2 threads, bit for bit") {
  TempDir dir("mirrored_eq");
  writeFile(dir / "one.toml", smallJob(dir / "one"));
  writeFile(dir / "two.toml", oneThread(smallJob(dir / "two", mirrored(2))));
  REQUIRE(runDtrain({"train", dir / "one.toml", "-q", "--set", "train.epochs=2"}).exit_code == 0);
  RunResult two = runDtrain({"train", dir / "two.toml", "-q", "--set", "train.epochs=2"});
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(readFile(dir / "two/checkpoints/latest/model.safetensors") ==
        readFile(dir / "one/checkpoints/latest/model.safetensors"));
}

TEST_CASE("mirrored: gradients reduced in per-layer buckets during backward give the same weights") {
  // 1 KB buckets: every layer is its own bucket, all-reduced while backward
  // still runs on the layers before it.
  TempDir dir("mirrored_buckets");
  writeFile(dir / "one.toml", smallJob(dir / "one"));
  REQUIRE(runDtrain({"train", dir / "one.toml", "-q", "--set", "train.epochs=2"}).exit_code == 0);
  const double reference = evalFigures(dir / "one").loss;
  for (int n : {2, 3}) {
    CAPTURE(n);
    std::string run = "b" + std::to_string(n);
    writeFile(dir / "job.toml", oneThread(smallJob(dir / run, mirrored(n))));
    RunResult r = runDtrain(
        {"train", dir / "job.toml", "-q", "--set", "train.epochs=2", "--set", "strategy.bucket_mb=0.001"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    if (n == 2)
      CHECK(readFile(dir / (run + "/checkpoints/latest/model.safetensors")) ==
            readFile(dir / "one/checkpoints/latest/model.safetensors"));
    CHECK(std::fabs(evalFigures(dir / run).loss - reference) < 1e-4 * std::fabs(reference) + 1e-6);
  }
}

TEST_CASE("mirrored: 3 and 4 workers reach the weights of one worker within float tolerance") {
  TempDir dir("mirrored_n");
  writeFile(dir / "one.toml", oneThread(smallJob(dir / "one")));
  REQUIRE(runDtrain({"train", dir / "one.toml", "-q", "--set", "train.epochs=2"}).exit_code == 0);
  const double reference = evalFigures(dir / "one").loss;
  for (int n : {3, 4}) {
    CAPTURE(n);
    writeFile(dir / "job.toml", oneThread(smallJob(dir / ("w" + std::to_string(n)), mirrored(n))));
    RunResult r = runDtrain({"train", dir / "job.toml", "-q", "--set", "train.epochs=2"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(std::fabs(evalFigures(dir / ("w" + std::to_string(n))).loss - reference) <
          1e-4 * std::fabs(reference) + 1e-6);
  }
}

TEST_CASE("mirrored: kill -9 of a worker stops the run within seconds, naming the rank") {
  TempDir dir("mirrored_kill");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", mirrored(2))));
  pid_t host = startDtrain({"train", dir / "job.toml", "-q", "--set", "train.epochs=200"}, dir / "log");
  // Wait until training has started (the first periodic checkpoint exists).
  REQUIRE(waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60));
  const std::vector<pid_t> workers = workersOf(host);
  REQUIRE(!workers.empty());
  for (pid_t w : workers) CHECK(ignoresSigpipe(w));
  const pid_t worker = workers[0];
  auto t0 = std::chrono::steady_clock::now();
  ::kill(worker, SIGKILL);
  int code = waitExit(host);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code == 137);
  CHECK(took < 12.0);
  CHECK(log.find("rank 0 (node 0, slot 0) (pid " + std::to_string(worker) + ") was killed by signal 9") !=
        std::string::npos);
  CHECK(log.find("SIGPIPE") == std::string::npos);
  // Every checkpoint left behind is complete: resume reads the latest one.
  CHECK(!stepDirs(dir / "run").empty());
}

TEST_CASE(
    "mirrored: a frozen worker (SIGSTOP) is lost after the heartbeat timeout, and nothing is left running") {
  TempDir dir("mirrored_stop");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", mirrored(2))));
  pid_t host = startDtrain({"train", dir / "job.toml", "-q", "--set", "train.epochs=200"}, dir / "log");
  REQUIRE(waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60));
  const std::vector<pid_t> workers = workersOf(host);
  REQUIRE(workers.size() == 2);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(workers[1], SIGSTOP);  // alive for the kernel, silent for its peers
  int code = waitExit(host);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code != 0);
  // The default heartbeat timeout is 10 s; the frozen worker is killed at once
  // rather than after the grace SIGTERM would get.
  CHECK(took < 12.0);
  CHECK(log.find("lost rank 1 (host ") != std::string::npos);
  CHECK(log.find("no heartbeat for 10.0 s") != std::string::npos);
  for (pid_t w : workers) CHECK(::kill(w, 0) == -1);  // reaped by the host: gone
  CHECK(!stepDirs(dir / "run").empty());
}
