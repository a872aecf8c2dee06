// [train] accumulate = k: k micro-batches of batch_size per update, the
// mathematics of one batch k times larger, under every strategy; a run killed
// between its updates resumes to the bits of an uninterrupted one.
#include <doctest/doctest.h>

#include <csignal>

#include "tests/train/run_helpers.h"
#include "tests/train/small_mlp_job.h"

using namespace dtrain::testing;

namespace {

// Momentum SGD with weight decay.
std::string mlpJob(const std::string& run_dir, int64_t batch, int64_t accumulate,
                   const std::string& extra = "") {
  return smallMlpJob(run_dir, batch, accumulate,
                     "type = \"sgd\"\nlr = 0.05\nmomentum = 0.9\nweight_decay = 0.01\n", extra);
}

}  // namespace

TEST_CASE("accumulate: 3 micro-batches of 4 update as one batch of 12, whatever the strategy") {
  TempDir dir("accumulate");
  writeFile(dir / "whole.toml", mlpJob(dir / "whole", 12, 1));
  RunResult whole = runDtrain({"train", dir / "whole.toml", "-q"});
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"one", ""},
      {"threads", "[job]\n"},  // below: 2 threads
      {"mirrored", "[strategy]\ntype = \"mirrored\"\nworkers = 2\n"},
      {"central", "[strategy]\ntype = \"central_storage\"\nworkers = 2\n"},
      {"ps", "[strategy]\ntype = \"parameter_server\"\nconsistency = \"sync\"\nworkers = 2\n"},
      {"pipeline", "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 2\n"}};
  for (const auto& [name, strategy] : runs) {
    CAPTURE(name);
    writeFile(dir / (name + ".toml"), mlpJob(dir / name, 4, 3, name == "threads" ? "" : strategy));
    std::vector<std::string> args = {"train", dir / (name + ".toml")};
    if (name == "threads") args.insert(args.end(), {"--set", "job.threads=2"});
    RunResult r = runDtrain(args);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    if (name == "one")
      CHECK(r.output.find("updates of 12 samples in 3 micro-batches of 4") != std::string::npos);
    // The same samples' gradients, summed in another order: a few float
    // roundings of each (1e-7 of it) per step, carried by 6 momentum steps
    // at lr 0.05 well inside 1e-5 of the largest weight.
    CHECK(checkpointDifference(dir / "whole/checkpoints/latest", dir / (name + "/checkpoints/latest"),
                               "model.safetensors") < 1e-5);
  }
}

TEST_CASE("accumulate: a run killed between updates resumes to the bits of an uninterrupted one") {
  TempDir dir("accumulate_resume");
  writeFile(dir / "ref.toml", mlpJob(dir / "ref", 5, 4));
  writeFile(dir / "killed.toml", mlpJob(dir / "killed", 5, 4));
  // 200 samples, 20 an update: 10 updates an epoch; checkpoints at 4, 8, the
  // epoch's end (10) and 12, the kill at 13, past the epoch's end.
  const std::vector<std::string> set = {"--set", "train.steps=14", "--set", "train.checkpoint_every_steps=4"};
  std::vector<std::string> ref = {"train", dir / "ref.toml", "-q"};
  ref.insert(ref.end(), set.begin(), set.end());
  REQUIRE(runDtrain(ref).exit_code == 0);
  std::vector<std::string> killed = {"train", dir / "killed.toml", "-q"};
  killed.insert(killed.end(), set.begin(), set.end());
  checkKilledRunResumesExactly(killed, 13, dir / "killed", "step-00000012", dir / "ref");
}

TEST_CASE("accumulate: a count below 1 is one line naming the key") {
  TempDir dir("accumulate_bad");
  writeFile(dir / "job.toml", mlpJob(dir / "run", 4, 0));
  RunResult r = runDtrain({"check", dir / "job.toml"});
  CHECK(r.exit_code != 0);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("[train] accumulate must be in [1, 65536]") != std::string::npos);
}
