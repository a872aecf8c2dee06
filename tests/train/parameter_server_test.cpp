// The parameter-server strategy through the binary: workers push gradients
// to shard processes, which sum them in worker order and apply the update;
// synchronous training is the same training as mirrored's and one process's
// with the same global batch, the checkpoint holds the same files, and a
// resume may change the number of shards or the strategy.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <string>

#include "core/train/safetensors.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

std::string parameterServer(int workers, int shards) {
  return "[strategy]\ntype = \"parameter_server\"\nworkers = " + std::to_string(workers) +
         "\nps = " + std::to_string(shards) + "\n";
}

void train(const TempDir& dir, const std::string& name, const std::string& job, int steps) {
  writeFile(dir / (name + ".toml"), job);
  const RunResult r =
      runDtrain({"train", dir / (name + ".toml"), "-q", "--set", "train.steps=" + std::to_string(steps)});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

std::string latest(const TempDir& dir, const std::string& name) {
  return dir / (name + "/checkpoints/latest");
}

}  // namespace

TEST_CASE("parameter_server: 2 workers and 1 or 2 shards train as mirrored and one process do") {
  TempDir dir("ps_sync");
  train(dir, "one", oneThread(smallJob(dir / "one")), 20);
  train(dir, "mirrored",
        oneThread(smallJob(dir / "mirrored", "[strategy]\ntype = \"mirrored\"\nworkers = 2\n")), 20);
  for (int shards : {1, 2}) {
    CAPTURE(shards);
    const std::string name = "ps" + std::to_string(shards);
    train(dir, name, oneThread(smallJob(dir / name, parameterServer(2, shards))), 20);
    // Pushed in parts during backward (small buckets, so there are several): the same sums.
    const std::string parts = "parts" + std::to_string(shards);
    train(dir, parts,
          oneThread(smallJob(dir / parts, parameterServer(2, shards) +
                                              "gradient_push = \"during_backward\"\nbucket_mb = 0.01\n")),
          20);
    CHECK(readFile(dir / (parts + "/checkpoints/latest/model.safetensors")) ==
          readFile(dir / (name + "/checkpoints/latest/model.safetensors")));
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "mirrored"), file) <= 1e-5);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "one"), file) <= 1e-5);
    }
  }
}

TEST_CASE("parameter_server: one asynchronous worker over 1 or 2 shards trains exactly as one process") {
  // One worker's async pushes are the whole batch's, applied in order: the
  // same arithmetic as one process's step, so the weights agree to the bit.
  // (Its pushes and answers go through shared memory, the parameters
  // written as the update makes them and the gradients cleared as they are
  // copied out: a stale answer or a gradient left over would show.)
  TempDir dir("ps_async_one");
  train(dir, "one", oneThread(smallJob(dir / "one")), 20);
  for (int shards : {1, 2}) {
    CAPTURE(shards);
    const std::string name = "async" + std::to_string(shards);
    train(dir, name,
          oneThread(smallJob(dir / name, parameterServer(1, shards) + "consistency = \"async\"\n")), 20);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "one"), file) == 0.0);
    }
  }
}

TEST_CASE("parameter_server: synchronous clipping of the summed gradient over 1 or 2 shards is mirrored's") {
  TempDir dir("ps_sync_clip");
  auto trainClipped = [&](const std::string& name, const std::string& strategy) {
    writeFile(dir / (name + ".toml"), oneThread(smallJob(dir / name, strategy)));
    const RunResult r = runDtrain({"train", dir / (name + ".toml"), "-q", "--set", "train.steps=20", "--set",
                                   "train.grad_clip_norm=0.05"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  };
  trainClipped("mirrored", "[strategy]\ntype = \"mirrored\"\nworkers = 2\n");
  train(dir, "unclipped", oneThread(smallJob(dir / "unclipped", parameterServer(2, 2))), 20);
  for (int shards : {1, 2}) {
    CAPTURE(shards);
    const std::string name = "ps" + std::to_string(shards);
    trainClipped(name, parameterServer(2, shards));
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "mirrored"), file) <= 1e-5);
    }
  }
  // The bound is tight enough to change the training.
  CHECK(checkpointDifference(latest(dir, "ps2"), latest(dir, "unclipped"), "model.safetensors") > 1e-3);
}

TEST_CASE("parameter_server: the placement is printed at the start, by size over the shards") {
  TempDir dir("ps_placement");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 2))));
  const RunResult r = runDtrain({"train", dir / "job.toml", "--set", "train.steps=2"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("parameter server: placement: 2 shards") != std::string::npos);
  CHECK(r.output.find("shard 0:") != std::string::npos);
  CHECK(r.output.find("shard 1:") != std::string::npos);
  CHECK(r.output.find("2 workers, parameters on 2 shard(s), synchronous updates") != std::string::npos);
  // Each step's line says how stale its pushes were and what each shard carried.
  const std::string metrics = readFile(dir / "run/metrics.jsonl");
  CHECK(metrics.find("\"staleness_max\":0.0,\"staleness_mean\":0.0,\"shard0_bytes\":") != std::string::npos);
  CHECK(metrics.find("\"shard1_requests_per_s\":") != std::string::npos);
}

TEST_CASE(
    "parameter_server: a resume with another number of shards, or as mirrored, ends where the straight run "
    "does") {
  TempDir dir("ps_resume");
  train(dir, "straight", oneThread(smallJob(dir / "straight", parameterServer(2, 2))), 20);
  for (const std::string& then : {std::string("strategy.ps=1"), std::string("strategy.type=mirrored")}) {
    CAPTURE(then);
    const std::string name = then == "strategy.ps=1" ? "one_shard" : "as_mirrored";
    // Killed after step 16; its last checkpoint is step 14's (one every 7 steps).
    writeFile(dir / (name + ".toml"), oneThread(smallJob(dir / name, parameterServer(2, 2))));
    const RunResult killed = runDtrain(
        {"train", dir / (name + ".toml"), "-q", "--set", "train.steps=20", "--fault-kill-at-step", "16"});
    CHECK(killed.exit_code != 0);
    const RunResult resumed = runDtrain({"resume", dir / name, "-q", "--set", then});
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK(checkpointDifference(latest(dir, name), latest(dir, "straight"), "model.safetensors") <= 1e-5);
    CHECK(checkpointDifference(latest(dir, name), latest(dir, "straight"), "optimizer.safetensors") <= 1e-5);
  }
}

TEST_CASE("parameter_server: configurations it cannot run are refused in one line") {
  TempDir dir("ps_refused");
  writeFile(dir / "job.toml", smallJob(dir / "run", parameterServer(2, 1)));
  const RunResult stats = runDtrain({"train", dir / "job.toml", "--set", "strategy.consistency=async",
                                     "--set", "strategy.sync_batchnorm=true"});
  CHECK(stats.exit_code == 2);
  CHECK(lineCount(stats.output) == 1);
  CHECK(stats.output.find("sync_batchnorm") != std::string::npos);
  const RunResult fewest = runDtrain({"train", dir / "job.toml", "--set", "strategy.min_workers=3"});
  CHECK(fewest.exit_code == 2);
  CHECK(fewest.output.find("[strategy] min_workers must be in [1, 2] (got 3)") != std::string::npos);
  const RunResult shards = runDtrain({"train", dir / "job.toml", "--set", "strategy.ps=0"});
  CHECK(shards.exit_code == 2);
  CHECK(shards.output.find("strategy.ps") != std::string::npos);
}

TEST_CASE("parameter_server: dtrain check prints the placement table, every variable on a shard") {
  TempDir dir("ps_check");
  writeFile(dir / "job.toml", smallJob(dir / "run", parameterServer(2, 3)));
  const RunResult r = runDtrain({"check", dir / "job.toml"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("# parameter-server placement") != std::string::npos);
  CHECK(r.output.find("placement: 3 shards") != std::string::npos);
  for (const char* variable : {"fc1.weight", "fc1.bias", "fc2.weight", "fc3.weight"}) {
    CAPTURE(variable);
    CHECK(r.output.find(std::string(variable) + "\n") != std::string::npos);
  }
}

namespace {

// The largest clock gap a run's shards answered, from their summary lines
// ("... clock gap max G"); -1 when no shard reported.
int64_t largestClockGap(const std::string& output) {
  int64_t largest = -1;
  for (size_t at = output.find("clock gap max "); at != std::string::npos;
       at = output.find("clock gap max ", at + 1))
    largest = std::max<int64_t>(largest, std::stoll(output.substr(at + 14)));
  return largest;
}

double testAccuracy(const std::string& output) {
  const size_t at = output.find("test accuracy ");
  REQUIRE(at != std::string::npos);
  return std::stod(output.substr(at + 14));
}

}  // namespace

TEST_CASE("parameter_server: bounded staleness holds a slowed worker's peers within the bound") {
  TempDir dir("ps_bounded");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 2))));
  for (int bound : {0, 2}) {
    CAPTURE(bound);
    const RunResult r =
        runDtrain({"train", dir / "job.toml", "--overwrite", "--set", "train.steps=30", "--set",
                   "strategy.consistency=bounded", "--set", "strategy.staleness=" + std::to_string(bound)},
                  "DTRAIN_TEST_SLOW_WORKER=1:20");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("(bounded)") != std::string::npos);
    const int64_t gap = largestClockGap(r.output);
    CHECK(gap >= 0);
    CHECK(gap <= bound);
  }
  // Without the bound the fast worker runs ahead of the slowed one.
  const RunResult free = runDtrain({"train", dir / "job.toml", "--overwrite", "--set", "train.steps=30",
                                    "--set", "strategy.consistency=async"},
                                   "DTRAIN_TEST_SLOW_WORKER=1:20");
  INFO(free.output);
  REQUIRE(free.exit_code == 0);
  CHECK(largestClockGap(free.output) > 2);
}

TEST_CASE("parameter_server: asynchronous training finishes and learns about as well as synchronous") {
  TempDir dir("ps_async");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 2))));
  const RunResult sync = runDtrain({"train", dir / "job.toml", "--overwrite", "--set", "train.epochs=3"});
  REQUIRE(sync.exit_code == 0);
  const RunResult async = runDtrain({"train", dir / "job.toml", "--overwrite", "--set", "train.epochs=3",
                                     "--set", "strategy.consistency=async"});
  INFO(async.output);
  REQUIRE(async.exit_code == 0);
  CHECK(async.output.find("(async)") != std::string::npos);
  CHECK(async.output.find("staleness max ") != std::string::npos);
  CHECK(std::fabs(testAccuracy(async.output) - testAccuracy(sync.output)) <= 0.1);
  // The checkpoint holds what every other strategy's does: eval reads it.
  const RunResult eval = runDtrain({"eval", dir / "run/checkpoints/latest"});
  INFO(eval.output);
  CHECK(eval.exit_code == 0);
}

TEST_CASE("parameter_server: pushes lost, repeated and delayed on the way are applied exactly once") {
  // The transport's test layer drops a fifth of the pushes and answers,
  // sends another fifth twice, and holds each back up to 3 ms: workers push
  // again when no answer comes, and shards apply each (worker, update) once.
  TempDir dir("ps_faults");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 2))));
  train(dir, "clean", oneThread(smallJob(dir / "clean", parameterServer(2, 2))), 12);
  const std::string faults = "DTRAIN_TEST_PS_FAULTS='drop=0.2,dup=0.2,delay_ms=3'";
  const RunResult sync = runDtrain({"train", dir / "job.toml", "--set", "train.steps=12"}, faults);
  INFO(sync.output);
  REQUIRE(sync.exit_code == 0);
  CHECK(sync.output.find("shard 0: 12 updates applied (sync)") != std::string::npos);
  CHECK(sync.output.find("shard 1: 12 updates applied (sync)") != std::string::npos);
  CHECK(readFile(dir / "run/checkpoints/latest/model.safetensors") ==
        readFile(dir / "clean/checkpoints/latest/model.safetensors"));
  CHECK(readFile(dir / "run/checkpoints/latest/optimizer.safetensors") ==
        readFile(dir / "clean/checkpoints/latest/optimizer.safetensors"));
  // Asynchronous: every push of both workers, once each.
  const RunResult async = runDtrain({"train", dir / "job.toml", "--overwrite", "--set", "train.steps=12",
                                     "--set", "strategy.consistency=async"},
                                    faults);
  INFO(async.output);
  REQUIRE(async.exit_code == 0);
  CHECK(async.output.find("shard 0: 24 updates applied (async)") != std::string::npos);
  CHECK(async.output.find("shard 1: 24 updates applied (async)") != std::string::npos);
}

TEST_CASE("parameter_server: kill -9 of a shard stops every process within seconds, naming the shard") {
  TempDir dir("ps_kill_shard");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 1))));
  const pid_t host = startDtrain({"train", dir / "job.toml", "-q", "--set", "train.epochs=200"}, dir / "log");
  REQUIRE(waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60));
  const std::vector<pid_t> processes = workersOf(host);
  REQUIRE(processes.size() == 3);  // 2 workers, then the shard
  const pid_t shard = processes[2];
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(shard, SIGKILL);
  const int code = waitExit(host);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code != 0);
  CHECK(took < 12.0);
  CHECK(log.find("parameter-server shard 0 (rank 2 (node 0, slot 2)) (pid " + std::to_string(shard) +
                 ") was killed by signal 9") != std::string::npos);
  for (pid_t p : processes) CHECK(::kill(p, 0) == -1);  // reaped by the host: gone
  // The latest checkpoint is complete: the run goes on, on 2 shards now.
  const std::vector<std::string> steps = stepDirs(dir / "run");
  REQUIRE(!steps.empty());
  const int64_t last = std::stoll(steps.back().substr(5));
  const RunResult resumed = runDtrain({"resume", dir / "run", "-q", "--set", "strategy.ps=2", "--set",
                                       "train.steps=" + std::to_string(last + 5)});
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.output.find("done: step " + std::to_string(last + 5)) != std::string::npos);
}

TEST_CASE(
    "parameter_server: asynchronous guard rails: clipped pushes and a learning rate scaled by staleness") {
  TempDir dir("ps_guard_rails");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", parameterServer(2, 1))));
  const RunResult r =
      runDtrain({"train", dir / "job.toml", "--set", "train.steps=20", "--set", "strategy.consistency=async",
                 "--set", "strategy.scale_lr_by_staleness=true", "--set", "train.grad_clip_norm=0.05"},
                "DTRAIN_TEST_SLOW_WORKER=1:10");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("shard 0: 40 updates applied (async)") != std::string::npos);
  // Each worker's pushes were clipped to the norm its share stands for.
  CHECK(std::isfinite(testAccuracy(r.output)));
}
