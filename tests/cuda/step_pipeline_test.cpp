// The GPU step never makes the host wait for the device in its steady state:
// the batch's copy runs on a copy stream, the loss sums are snapshotted into
// pinned memory and read a step later. Every synchronising call goes through
// core/backend/device_waits.h, which counts them: after warm-up the count
// must not move from step to step (a host held back while it has whole steps
// queued ahead of the device is counted apart). And the
// pipelined run computes what the CPU computes: its metrics hold each step's
// own figures.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/backend/device_waits.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "core/train/trainer.h"
#include "strategies/make_strategy.h"
#include "tests/common/temp_dir.h"

using namespace dtrain;

namespace {

JobConfig smallGpuJob(const std::string& run_dir, int64_t steps, const std::string& device) {
  const std::string text = "[job]\nname = \"pipeline\"\nrun_dir = \"" + run_dir +
                           "\"\nseed = 5\nthreads = 1\ndevice = \"" + device +
                           "\"\n"
                           "[model]\npreset = \"mlp\"\nhidden = [64]\n"
                           "[data]\ndataset = \"synthetic\"\ntrain_samples = 4096\ntest_samples = 64\nshape "
                           "= [1, 8, 8]\nclasses = 4\n"
                           "[train]\nsteps = " +
                           std::to_string(steps) +
                           "\nbatch_size = 32\n"
                           "[optimizer]\ntype = \"sgd\"\nlr = 0.05\nmomentum = 0.9\n";
  const std::string path = run_dir + ".toml";
  std::ofstream(path) << text;
  JobConfig job = parseJobFile(path, {});
  validateJob(job);
  return job;
}

// The waits the steps after `from` made, up to the last step's (before its
// evaluation and checkpoint).
int64_t steadyStateWaits(const std::string& run_dir, int64_t steps, int64_t from) {
  TrainerOptions options;
  options.quiet = true;
  int64_t at_from = -1, at_last = -1, ahead_from = -1, ahead_last = -1;
  options.step_observer = [&](int64_t step) {
    if (step == from) at_from = deviceWaits(), ahead_from = hostAheadWaits();
    if (step == steps - 1) at_last = deviceWaits(), ahead_last = hostAheadWaits();
  };
  options.strategy = makeStrategy(StrategySection{}, nullptr);
  Trainer trainer(smallGpuJob(run_dir, steps, "cuda"), options);
  const TrainOutcome out = trainer.run(nullptr);
  REQUIRE(out.step == steps);
  REQUIRE(at_from >= 0);
  // A host faster than the device is held back two steps ahead of it: those
  // waits leave the device whole steps to run, and are only reported.
  MESSAGE("the host waited " << ahead_last - ahead_from << " times with whole steps queued ahead");
  return at_last - at_from;
}

std::string metricsOf(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("cuda: steady-state training steps make the host wait for the GPU zero times") {
  testing::TempDir dir("pipeline");
  // The first steps choose algorithms and fill the allocator's cache; from
  // step 5 on, 30 steps are queued one behind the other without a wait.
  CHECK(steadyStateWaits(dir.file("run"), 36, 5) == 0);
}

TEST_CASE("cuda: the pipelined GPU run logs each step's own figures, as the CPU run does") {
  testing::TempDir dir("pipeline");
  TrainerOptions options;
  options.quiet = true;
  options.strategy = makeStrategy(StrategySection{}, nullptr);
  Trainer gpu(smallGpuJob(dir.file("gpu"), 12, "cuda"), options);
  gpu.run(nullptr);
  options.strategy = makeStrategy(StrategySection{}, nullptr);
  Trainer cpu(smallGpuJob(dir.file("cpu"), 12, "cpu"), options);
  cpu.run(nullptr);
  // Step by step the losses agree within fp32 rounding; a figure shifted by
  // one step would differ by the training progress of a step.
  std::istringstream g(metricsOf(dir.file("gpu"))), c(metricsOf(dir.file("cpu")));
  std::string gl, cl;
  int train_lines = 0;
  while (std::getline(g, gl) && std::getline(c, cl)) {
    if (gl.find("\"split\":\"train\"") == std::string::npos) continue;
    ++train_lines;
    auto loss = [](const std::string& line) { return std::stod(line.substr(line.find("\"loss\":") + 7)); };
    auto step = [](const std::string& line) { return std::stoll(line.substr(line.find("\"step\":") + 7)); };
    CHECK(step(gl) == step(cl));
    CHECK(loss(gl) == doctest::Approx(loss(cl)).epsilon(1e-4));
  }
  CHECK(train_lines == 12);
}
