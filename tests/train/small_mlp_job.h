// A small job for tests of the training loop's mathematics: the mlp with
// dropout (its masks are drawn by the sample's row in the global batch) on 200
// synthetic samples, one thread, 6 steps, no checkpoints but the last.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain::testing {

// `optimizer`: the [optimizer] table's lines; `extra`: more tables.
inline std::string smallMlpJob(const std::string& run_dir, int64_t batch, int64_t accumulate,
                               const std::string& optimizer, const std::string& extra = "") {
  return "[job]\nname = \"small_mlp\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 5\nthreads = 1\n"
         "[model]\npreset = \"mlp\"\nhidden = [24, 16]\ndropout = 0.2\n"
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 200\ntest_samples = 40\nshape = [1, 8, 8]\n"
         "classes = 4\n"
         "[train]\nsteps = 6\nbatch_size = " +
         std::to_string(batch) + "\naccumulate = " + std::to_string(accumulate) +
         "\ncheckpoint_every_steps = 0\neval_every_epoch = false\n[optimizer]\n" + optimizer + extra;
}

}  // namespace dtrain::testing
