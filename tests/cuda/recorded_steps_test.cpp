// Training steps recorded as CUDA graphs ([job] cuda_graphs) compute bit for
// bit what the same steps compute call by call: the replays read each
// step's dropout seed, batch offset, learning rate and bias corrections from
// device memory, and the batch from the stager's buffer. Models with every
// kind of per-step state: dropout masks, batch norm's running statistics,
// Adam's moments, gradient clipping, a cosine schedule.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/backend/algorithm_cache.h"
#include "core/backend/step_graph.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "core/train/checkpoint.h"
#include "core/train/trainer.h"
#include "strategies/make_strategy.h"
#include "tests/common/temp_dir.h"

using namespace dtrain;

namespace {

JobConfig graphJob(const std::string& run_dir, const std::string& model, const std::string& optimizer,
                   bool graphs) {
  const std::string text =
      "[job]\nname = \"graphs\"\nrun_dir = \"" + run_dir +
      "\"\nseed = 11\nthreads = 1\ndevice = \"cuda\"\ncuda_graphs = " + (graphs ? "true" : "false") + "\n" +
      model +
      "[data]\ndataset = \"synthetic\"\ntrain_samples = 600\ntest_samples = 64\nshape = [3, 8, 8]\nclasses = "
      "5\n"
      "[train]\nsteps = 14\nbatch_size = 64\ngrad_clip_norm = 0.5\n"
      "[schedule]\ntype = \"cosine\"\n" +
      optimizer;
  const std::string path = run_dir + ".toml";
  std::ofstream(path) << text;
  JobConfig job = parseJobFile(path, {});
  validateJob(job);
  return job;
}

// Every tensor of the two final checkpoints' weights and optimizer state,
// compared bit for bit.
void checkSameBits(const std::string& a_run, const std::string& b_run) {
  const LoadedCheckpoint a = loadLatestCheckpoint(a_run, nullptr);
  const LoadedCheckpoint b = loadLatestCheckpoint(b_run, nullptr);
  REQUIRE(a.step == b.step);
  for (const SafetensorsFile* file : {&a.weights, &a.optimizer}) {
    const SafetensorsFile& other = file == &a.weights ? b.weights : b.optimizer;
    REQUIRE(file->tensors.size() == other.tensors.size());
    for (const SafetensorsTensor& t : file->tensors) {
      const SafetensorsTensor* u = other.find(t.name);
      REQUIRE(u != nullptr);
      REQUIRE(u->data.size() == t.data.size());
      INFO(t.name);
      CHECK(std::memcmp(t.data.data(), u->data.data(), t.data.size() * sizeof(float)) == 0);
    }
  }
}

// Trains the job with and without graphs; the graphed run must have replayed.
void checkReplaysMatch(const std::string& model, const std::string& optimizer) {
  testing::TempDir dir("graphs");
  TrainerOptions options;
  options.quiet = true;
  options.strategy = makeStrategy(StrategySection{}, nullptr);
  Trainer graphed(graphJob(dir.file("graphed"), model, optimizer, true), options);
  const TrainOutcome with = graphed.run(nullptr);
  // The algorithms are chosen by timing, and two runs may time them
  // differently: the eager run computes with the graphed run's choices, as a
  // resume would, so that only the replays can make the bits differ.
  const std::filesystem::path choices = std::filesystem::path(dir.file("graphed")) / kAlgorithmCacheFileName;
  REQUIRE(std::filesystem::exists(choices));
  std::filesystem::create_directories(dir.file("plain"));
  std::filesystem::copy_file(choices, std::filesystem::path(dir.file("plain")) / kAlgorithmCacheFileName);
  options.strategy = makeStrategy(StrategySection{}, nullptr);
  Trainer plain(graphJob(dir.file("plain"), model, optimizer, false), options);
  const TrainOutcome without = plain.run(nullptr);
  REQUIRE(with.step == 14);
  // 600 samples make 9 full batches and a short one per epoch: steps 1-9 and
  // 11-14 are full. Each of the two buffers runs twice call by call, is
  // recorded on its third step and replayed from then on.
  CHECK(with.graph_replays >= 6);
  CHECK(without.graph_replays == 0);
  checkSameBits(dir.file("graphed"), dir.file("plain"));
  CHECK(with.test_loss == without.test_loss);
}

}  // namespace

TEST_CASE(
    "cuda: replayed CUDA graphs train a ResNet with batch norm, AdamW and clipping bit for bit as eagerly") {
  checkReplaysMatch("[model]\npreset = \"resnet\"\ndepth = 8\n",
                    "[optimizer]\ntype = \"adamw\"\nlr = 0.01\nweight_decay = 0.01\n");
}

TEST_CASE("cuda: replayed CUDA graphs train a cnn with dropout and momentum SGD bit for bit as eagerly") {
  checkReplaysMatch("[model]\npreset = \"cnn\"\ndropout = 0.3\n",
                    "[optimizer]\ntype = \"sgd\"\nlr = 0.05\nmomentum = 0.9\nnesterov = true\n");
}

TEST_CASE("cuda: a recording refuses a read-back to the host and runs nothing") {
  const Device gpu = Device::cuda(0);
  Tensor x = Tensor::zeros(Shape{4}, gpu);
  std::string why_not;
  auto graph = StepGraph::record(
      gpu,
      [&] {
        x.fill(7.0f);                             // queued: recorded, not run
        const Tensor back = x.to(Device::cpu());  // waits for the device: not allowed while recording
      },
      &why_not);
  CHECK(graph == nullptr);
  CHECK(!why_not.empty());
  // Nothing ran, and the device works on.
  CHECK(x.to(Device::cpu()).data()[0] == 0.0f);
  x.fill(2.0f);
  CHECK(x.to(Device::cpu()).data()[3] == 2.0f);
}

TEST_CASE("cuda: a recorded graph replays its work on each launch") {
  const Device gpu = Device::cuda(0);
  Tensor x = Tensor::zeros(Shape{1000}, gpu);
  Tensor one = Tensor::zeros(Shape{1000}, gpu);
  one.fill(1.0f);
  std::string why_not;
  auto graph = StepGraph::record(
      gpu, [&] { x.add(one); }, &why_not);
  REQUIRE_MESSAGE(graph != nullptr, why_not);
  CHECK(x.to(Device::cpu()).data()[0] == 0.0f);  // recording ran nothing
  for (int i = 0; i < 5; ++i) graph->launch();
  const Tensor back = x.to(Device::cpu());
  CHECK(back.data()[0] == 5.0f);
  CHECK(back.data()[999] == 5.0f);
}
