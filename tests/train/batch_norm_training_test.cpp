// Training a residual network with batch norm through the binary: the
// statistics are the rank's whole batch whatever the thread count; with
// sync_batchnorm N ranks compute what one process computes with the same
// global batch; without it each rank normalises its own slice; running
// statistics travel in checkpoints, so a resumed run ends where an
// uninterrupted one does.
#include <doctest/doctest.h>

#include <cmath>

#include "core/train/checkpoint.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// conv-bn-relu, a residual block (conv-bn-relu-conv-bn + the block input),
// relu, global average pooling, dense: on 1000 synthetic 12x12 samples in
// batches of 48 (the last batch of an epoch has 40).
std::string bnJob(const std::string& run_dir, int threads, const std::string& extra = "") {
  std::string layers;
  auto layer = [&](const std::string& name, const std::string& type, const std::string& options) {
    layers += "[[model.layers]]\nname = \"" + name + "\"\ntype = \"" + type + "\"\n" + options;
  };
  const std::string conv = "filters = 8\nkernel = 3\npadding = 1\nbias = false\n";
  layer("stem", "conv2d", conv);
  layer("stem_bn", "batch_norm", "");
  layer("stem_relu", "relu", "");
  layer("a", "conv2d", conv);
  layer("a_bn", "batch_norm", "");
  layer("a_relu", "relu", "");
  layer("b", "conv2d", conv);
  layer("b_bn", "batch_norm", "momentum = 0.2\n");
  layer("sum", "add", "inputs = [\"b_bn\", \"stem_relu\"]\n");
  layer("sum_relu", "relu", "");
  layer("pool", "global_avg_pool", "");
  layer("fc", "dense", "units = 4\n");
  return "[job]\nname = \"bn\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 11\nthreads = " + std::to_string(threads) +
         "\n[data]\ndataset = \"synthetic\"\ntrain_samples = 1000\ntest_samples = 200\nshape = [1, 12, 12]\n"
         "classes = 4\n"
         "[train]\nepochs = 2\nbatch_size = 48\ncheckpoint_every_steps = 7\nkeep_last = 50\n"
         "[optimizer]\ntype = \"sgd\"\nlr = 0.05\nmomentum = 0.9\n" +
         extra + "[model]\n" + layers;
}

dtrain::SafetensorsFile weightsOf(const std::string& run_dir) {
  return dtrain::readCheckpoint(run_dir + "/checkpoints/latest").weights;
}

// Largest |a - b| over every tensor (parameters and running statistics),
// relative to the largest |a|.
double relativeDifference(const dtrain::SafetensorsFile& a, const dtrain::SafetensorsFile& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  double diff = 0, scale = 0;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    REQUIRE(a.tensors[t].name == b.tensors[t].name);
    REQUIRE(a.tensors[t].data.size() == b.tensors[t].data.size());
    for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
      diff = std::max(diff, std::fabs(double(a.tensors[t].data[i]) - b.tensors[t].data[i]));
      scale = std::max(scale, std::fabs(double(a.tensors[t].data[i])));
    }
  }
  return diff / scale;
}

const std::string kMirrored2 = "[strategy]\ntype = \"mirrored\"\nworkers = 2\n";

void train(const TempDir& dir, const std::string& name, const std::string& job) {
  writeFile(dir / (name + ".toml"), job);
  RunResult r = runDtrain({"train", dir / (name + ".toml"), "-q"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

}  // namespace

TEST_CASE("batch norm: 2 and 3 compute threads compute what one thread computes") {
  TempDir dir("bn_threads");
  train(dir, "t1", bnJob(dir / "t1", 1));
  const auto one = weightsOf(dir / "t1");
  bool has_running_stats = false;
  for (const auto& t : one.tensors) has_running_stats |= t.name == "a_bn.running_var";
  CHECK(has_running_stats);
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    const std::string name = "t" + std::to_string(threads);
    train(dir, name, bnJob(dir / name, threads));
    const double diff = relativeDifference(one, weightsOf(dir / name));
    MESSAGE("max relative difference with " << threads << " threads: " << diff);
    CHECK(diff < 1e-4);  // the order of float sums only; per-slice statistics would differ by far more
  }
}

TEST_CASE("batch norm: 2 workers with sync_batchnorm compute what one process computes") {
  TempDir dir("bn_sync");
  train(dir, "one", bnJob(dir / "one", 2));
  train(dir, "sync", bnJob(dir / "sync", 1, kMirrored2 + "sync_batchnorm = true\n"));
  const double diff = relativeDifference(weightsOf(dir / "one"), weightsOf(dir / "sync"));
  MESSAGE("max relative difference, 2 synchronised ranks vs 1 process: " << diff);
  CHECK(diff < 1e-5);
  const EvalFigures one = evalFigures(dir / "one"), sync = evalFigures(dir / "sync");
  CHECK(std::fabs(one.loss - sync.loss) < 1e-4 * one.loss);

  // Without the option each rank normalises by its own 24 samples: another
  // computation, which still learns.
  train(dir, "per_rank", bnJob(dir / "per_rank", 1, kMirrored2));
  const double per_rank = relativeDifference(weightsOf(dir / "one"), weightsOf(dir / "per_rank"));
  MESSAGE("max relative difference, 2 ranks with their own statistics vs 1 process: " << per_rank);
  CHECK(per_rank > 1e-3);
  CHECK(evalFigures(dir / "per_rank").accuracy > 0.5);  // 4 classes: chance is 0.25
}

TEST_CASE("batch norm: a synchronous parameter server averages the running statistics as mirrored does") {
  // Its workers average them through the rendezvous store (no collective of
  // theirs may wait for a lost worker), and its chief evaluates alone.
  TempDir dir("bn_ps");
  train(dir, "mirrored", bnJob(dir / "mirrored", 1, kMirrored2));
  train(dir, "ps", bnJob(dir / "ps", 1, "[strategy]\ntype = \"parameter_server\"\nworkers = 2\nps = 1\n"));
  const double diff = relativeDifference(weightsOf(dir / "mirrored"), weightsOf(dir / "ps"));
  MESSAGE("max relative difference, sync parameter server vs mirrored: " << diff);
  CHECK(diff < 1e-5);
  const EvalFigures mirrored = evalFigures(dir / "mirrored"), ps = evalFigures(dir / "ps");
  CHECK(std::fabs(mirrored.loss - ps.loss) < 1e-4 * mirrored.loss);
  CHECK(mirrored.accuracy == ps.accuracy);
}

TEST_CASE(
    "batch norm: kill -9 mid-epoch and resume ends with the uninterrupted run's weights and statistics") {
  TempDir dir("bn_resume");
  train(dir, "reference", bnJob(dir / "reference", 2));
  writeFile(dir / "killed.toml", bnJob(dir / "killed", 2));
  RunResult killed = runDtrain({"train", dir / "killed.toml", "-q", "--fault-kill-at-step", "17"});
  CHECK(killed.exit_code == 128 + SIGKILL);
  RunResult resumed = runDtrain({"resume", dir / "killed", "-q"});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(readFile(dir / "killed/checkpoints/latest/model.safetensors") ==
        readFile(dir / "reference/checkpoints/latest/model.safetensors"));
}
