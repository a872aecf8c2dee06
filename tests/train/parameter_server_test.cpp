// The parameter-server strategy through the binary: workers push gradients
// to shard processes, which sum them in worker order and apply the update;
// synchronous training is the same training as mirrored's and one process's
// with the same global batch, the checkpoint holds the same files, and a
// resume may change the number of shards or the strategy.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/train/safetensors.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

std::string oneThread(std::string job) {
  job.replace(job.find("threads = 2"), 11, "threads = 1");
  return job;
}

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
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "mirrored"), file) <= 1e-5);
      CHECK(checkpointDifference(latest(dir, name), latest(dir, "one"), file) <= 1e-5);
    }
  }
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
  writeFile(dir / "clip.toml", smallJob(dir / "clip", parameterServer(2, 1)));
  const RunResult clip = runDtrain({"train", dir / "clip.toml", "--set", "train.grad_clip_norm=1.0"});
  CHECK(clip.exit_code == 2);
  CHECK(lineCount(clip.output) == 1);
  CHECK(clip.output.find("grad_clip_norm") != std::string::npos);
  const RunResult shards = runDtrain({"train", dir / "clip.toml", "--set", "strategy.ps=0"});
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
