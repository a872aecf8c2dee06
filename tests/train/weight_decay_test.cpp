// AdamW's weight decay on matrices only reaches every place an update runs:
// a parameter server's shards (the mask crosses in their init message) and
// a pipeline's stages (each masks its own layout), which must decay exactly
// the tensors one process decays.
#include <doctest/doctest.h>

#include "tests/train/run_helpers.h"
#include "tests/train/small_mlp_job.h"

using namespace dtrain::testing;

TEST_CASE("weight decay: shards and stages decay the tensors one process decays, and only those") {
  TempDir dir("weight_decay");
  // A decay large enough that decaying the biases too moves them visibly.
  const std::string adamw = "type = \"adamw\"\nlr = 0.01\nweight_decay = 5.0\n";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"one", ""},
      {"all", ""},  // below: decay_1d
      // One worker: its gradients are one process's, bit for bit.
      {"ps", "[strategy]\ntype = \"parameter_server\"\nconsistency = \"sync\"\nworkers = 1\nps = 2\n"},
      {"pipeline", "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 1\nschedule = \"gpipe\"\n"}};
  for (const auto& [name, strategy] : runs) {
    CAPTURE(name);
    writeFile(dir / (name + ".toml"),
              smallMlpJob(dir / name, 12, 1, adamw + (name == "all" ? "decay_1d = true\n" : ""), strategy));
    RunResult r = runDtrain({"train", dir / (name + ".toml"), "-q"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  for (const char* other : {"ps", "pipeline"}) {
    CAPTURE(other);
    CHECK(checkpointDifference(dir / "one/checkpoints/latest",
                               dir / (std::string(other) + "/checkpoints/latest"),
                               "model.safetensors") < 1e-6);
  }
  // The biases grow from zero by about lr a step; decayed too (decay_1d), at
  // lr x 5 = 5% a step, they end some percent smaller: far above rounding.
  CHECK(checkpointDifference(dir / "one/checkpoints/latest", dir / "all/checkpoints/latest",
                             "model.safetensors") > 1e-4);
}

TEST_CASE("weight decay: decay_1d with an optimizer whose decay is L2 on every gradient is one line") {
  TempDir dir("weight_decay_bad");
  writeFile(dir / "job.toml", smallMlpJob(dir / "run", 12, 1, "type = \"sgd\"\ndecay_1d = true\n"));
  RunResult r = runDtrain({"check", dir / "job.toml"});
  CHECK(r.exit_code != 0);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("decay_1d") != std::string::npos);
  CHECK(r.output.find("every tensor") != std::string::npos);
}
