// `dtrain bench step`: trains a few steps of a job in one process and reports
// where a step's time goes. On the CPU the figures are wall-clock spans: every
// layer that computes appears once, in model order, with its algorithm; the
// per-layer times add up to the forward and backward phases; the step rate
// agrees with the batch and the step time; nothing is written to the run
// directory.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "core/io/json.h"
#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

using testing::RunResult;
using testing::TempDir;

const JsonValue& field(const JsonValue& v, const std::string& key) {
  const JsonValue* f = v.find(key);
  REQUIRE_MESSAGE(f != nullptr, key);
  return *f;
}

std::string cnnJob(const std::string& run_dir) {
  return "[job]\nname = \"cnn-bench\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 3\nthreads = 2\n"
         "[model]\npreset = \"cnn\"\n"
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 256\ntest_samples = 64\nshape = [1, 28, 28]\n"
         "classes = 10\n"
         "[train]\nepochs = 1\nbatch_size = 32\n"
         "[optimizer]\ntype = \"sgd\"\nlr = 0.01\nmomentum = 0.9\n";
}

TEST_CASE("bench step times every computing layer of a CPU step and writes nothing") {
  TempDir dir("bench-step");
  const std::string run_dir = dir.file("run");
  testing::writeFile(dir.file("job.toml"), cnnJob(run_dir));
  // 256 samples in batches of 32 is 8 steps per epoch: 12 steps cross an epoch.
  const RunResult r =
      testing::runDtrain({"bench", "step", dir.file("job.toml"), "--steps", "10", "--warmup", "2", "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const JsonValue report = parseJson(r.output);
  CHECK(field(report, "device").asString() == "cpu");
  CHECK(field(report, "steps").asInt64() == 10);
  CHECK(field(report, "warmup").asInt64() == 2);
  CHECK(field(report, "batch_size").asInt64() == 32);
  const double step_ms = field(report, "step_ms").asDouble();
  REQUIRE(step_ms > 0);
  CHECK(field(report, "images_per_s").asDouble() == doctest::Approx(32 / (step_ms / 1e3)).epsilon(0.01));

  const JsonValue& phases = field(report, "phases");
  double forward = 0, backward = 0;
  std::vector<std::string> names, algorithms;
  for (const JsonValue& layer : field(report, "layers").asArray()) {
    names.push_back(field(layer, "name").asString());
    const std::string type = field(layer, "type").asString();
    const double f = field(layer, "forward_ms").asDouble(), b = field(layer, "backward_ms").asDouble();
    CHECK_MESSAGE(f > 0, names.back());
    forward += f;
    backward += b;
    if (type == "conv2d") algorithms.push_back(field(layer, "algorithm").asString());
    else
      CHECK(field(layer, "algorithm").asString().empty());
  }
  // The cnn preset: two convolutions (relus fused into them), pooling, dense layers.
  REQUIRE(algorithms.size() == 2);
  for (const std::string& a : algorithms)
    CHECK_MESSAGE((a == "im2col" || a == "winograd2x2" || a == "winograd4x4"), a);
  CHECK(forward == doctest::Approx(field(phases, "forward_ms").asDouble()).epsilon(1e-6));
  CHECK(backward == doctest::Approx(field(phases, "backward_ms").asDouble()).epsilon(1e-6));
  // The parts of a step cannot exceed it (the other threads' slices run alongside replica 0's).
  const double parts = forward + backward + field(phases, "loss_ms").asDouble() +
                       field(phases, "optimizer_ms").asDouble() + field(phases, "data_wait_ms").asDouble();
  CHECK(parts <= step_ms * 1.05);
  CHECK(field(phases, "optimizer_ms").asDouble() > 0);
  CHECK(field(phases, "host_idle_ms").asDouble() == 0);  // the CPU never waits for a device
  CHECK(field(phases, "copy_ms").asDouble() == 0);
  CHECK_FALSE(std::filesystem::exists(run_dir));
}

TEST_CASE("bench step prints a table by default and refuses a multi-process strategy in one line") {
  TempDir dir("bench-step");
  testing::writeFile(dir.file("job.toml"), cnnJob(dir.file("run")));
  const RunResult table = testing::runDtrain({"bench", "step", dir.file("job.toml"), "--steps", "2", "--warmup", "0"});
  REQUIRE_MESSAGE(table.exit_code == 0, table.output);
  CHECK(table.output.find("forward ms") != std::string::npos);
  CHECK(table.output.find("conv1") != std::string::npos);

  const RunResult mirrored = testing::runDtrain(
      {"bench", "step", dir.file("job.toml"), "--set", "strategy.type=mirrored", "--set", "strategy.workers=2"});
  CHECK(mirrored.exit_code == 2);
  CHECK(mirrored.output.find("bench step times one process") != std::string::npos);
  CHECK(mirrored.output.find('\n') == mirrored.output.size() - 1);
}

}  // namespace
}  // namespace dtrain
