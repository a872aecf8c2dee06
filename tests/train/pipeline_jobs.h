// The pipeline tests' jobs: the mlp with dropout, the cnn and a residual DAG
// whose skip connections cross the cuts, on 10-sample global batches (micro-
// batches of uneven sizes for most counts), 3 steps of momentum SGD, the
// loss label-smoothed.
#pragma once
#include <string>
#include <vector>

#include "tests/train/run_helpers.h"

namespace dtrain::testing {

// Writes `toml` to `path` and trains it quietly, to the end.
inline void train(const std::string& toml, const std::string& path) {
  writeFile(path, toml);
  const RunResult r = runDtrain({"train", path, "-q"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

struct ModelCase {
  std::string name, model;
};

// The residual DAG of tests/common/residual_dag.h as [[model.layers]].
inline std::string residualLayers() {
  auto conv = [](const std::string& name, const std::string& input, int kernel = 3) {
    return "[[model.layers]]\nname = \"" + name + "\"\ntype = \"conv2d\"\ninputs = [\"" + input +
           "\"]\nfilters = 3\nkernel = " + std::to_string(kernel) +
           "\npadding = " + std::to_string(kernel / 2) + "\n";
  };
  auto layer = [](const std::string& name, const std::string& type, const std::string& inputs) {
    return "[[model.layers]]\nname = \"" + name + "\"\ntype = \"" + type + "\"\ninputs = [" + inputs + "]\n";
  };
  return "[model]\n" + conv("stem", "input") + conv("c1", "stem") + layer("r1", "relu", "\"c1\"") +
         conv("c2", "r1") + layer("sum1", "add", "\"c2\", \"stem\"") + layer("act1", "relu", "\"sum1\"") +
         conv("c3", "act1") + layer("sum2", "add", "\"act1\", \"c3\"") + conv("c4", "c3") +
         conv("p", "act1", 1) + layer("sum3", "add", "\"sum2\", \"c4\", \"p\"") +
         layer("flat", "flatten", "\"sum3\"") +
         "[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\ninputs = [\"flat\"]\nunits = 4\n";
}

inline std::vector<ModelCase> models() {
  return {{"mlp", "[model]\npreset = \"mlp\"\nhidden = [24, 16, 12]\ndropout = 0.2\n"},
          {"cnn", "[model]\npreset = \"cnn\"\n"},
          {"residual", residualLayers()}};
}

// 10 samples a global batch: micro-batches of uneven sizes for most counts.
inline std::string job(const std::string& run_dir, const ModelCase& m, const std::string& strategy) {
  return "[job]\nname = \"pipe\"\nrun_dir = \"" + run_dir + "\"\nseed = 3\nthreads = 1\n" + m.model +
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 200\ntest_samples = 40\nshape = [1, 8, 8]\n"
         "classes = 4\n"
         "[train]\nsteps = 3\nbatch_size = 10\ncheckpoint_every_steps = 0\nlabel_smoothing = 0.1\n"
         "[optimizer]\ntype = \"sgd\"\nlr = 0.05\nmomentum = 0.9\nweight_decay = 0.01\n" +
         strategy;
}

}  // namespace dtrain::testing
