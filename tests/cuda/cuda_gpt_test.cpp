// A language model on a GPU: the per-position loss against the CPU's
// (padding tokens ignored, a padded vocabulary's columns left out), and a tiny
// GPT trained on the GPU, alone and as a pipeline whose output layer is tied
// to a table in another stage, ending where one CPU process does (fp32, the
// GPU's sums rounding in another order: within 1e-4).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend/device_loss.h"
#include "core/backend/ops.h"
#include "tests/cuda/device_compare.h"
#include "tests/train/gpt_jobs.h"
#include "tests/train/run_helpers.h"

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("cuda: the per-position loss equals the CPU's, padding and padded columns left out") {
  const int64_t rows = 300, width = 80, classes = 70;
  std::mt19937 rng(5);
  const Tensor logits = randomHost(Shape{rows, width}, rng, 4.0f);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  std::uniform_int_distribution<int> label(-1, classes - 1);
  for (int32_t& l : labels) l = label(rng);  // about 1 in 71 a padding token
  const float scale = 0.01f;
  std::vector<float> want(static_cast<size_t>(rows * width));
  int64_t correct = 0, counted = 0;
  const double loss = ops::tokenCrossEntropy(logits.data(), labels.data(), rows, width, classes, scale,
                                             want.data(), &correct, &counted, 0.0f);
  auto device_loss = DeviceLoss::make(gpuDevice(), classes, width);
  const Tensor on_gpu = logits.to(gpuDevice());
  Tensor dlogits = Tensor::zeros(Shape{rows, width}, gpuDevice());
  device_loss->queue(on_gpu.data(), labels.data(), rows, scale, dlogits.data());
  const LossSums sums = device_loss->read();
  CHECK(sums.samples == counted);
  CHECK(sums.correct == correct);
  // The CPU sums float exponentials in lanes, the GPU in double.
  CHECK(std::fabs(sums.loss_sum - loss) < 1e-5 * loss);
  Tensor expected = Tensor::empty(Shape{rows, width});
  std::copy(want.begin(), want.end(), expected.data());
  CHECK(relativeError(dlogits, expected) < 1e-5);
}

TEST_CASE("cuda: a tiny GPT trained on the GPU, alone and as a tied pipeline, ends where the CPU's does") {
  TempDir dir("cuda_gpt");
  writeFile(dir / "text.txt", corpus());
  const std::string pipeline = "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 3\n";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"cpu", ""}, {"gpu", ""}, {"gpu_pipeline", pipeline}};
  for (const auto& [name, strategy] : runs) {
    std::string toml = gptJob(dir / name, dir / "text.txt", 1, strategy);
    if (name != "cpu") toml.replace(toml.find("threads = 1"), 11, "threads = 1\ndevice = \"cuda\"");
    writeFile(dir / (name + ".toml"), toml);
    // trainWithSgd; a padded vocabulary and a padding id, so both are
    // exercised on the device.
    RunResult r = runDtrain(
        trainWithSgd(dir / (name + ".toml"), 20, {"--set", "data.pad_id=32", "--set", "model.vocab=320"}));
    INFO(name << ": " << r.output);
    REQUIRE(r.exit_code == 0);
  }
  for (const char* run : {"gpu", "gpu_pipeline"}) {
    CAPTURE(run);
    CHECK(checkpointDifference(dir / "cpu/checkpoints/latest",
                               dir / (std::string(run) + "/checkpoints/latest"), "model.safetensors") < 1e-4);
    CHECK(std::fabs(evalFigures(dir / "cpu").loss - evalFigures(dir / run).loss) <
          1e-4 * evalFigures(dir / "cpu").loss);
  }
}
