// The tiny byte-level GPT of the training tests: a generated English-like
// corpus and the job that trains on it (2 layers, 2 heads, 16 dims, context
// 16, dropout 0.1, AdamW), checkpointing every 10 steps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::testing {

// About 8 KB of English with enough repetition to be learnable in a few
// dozen steps, yet not a single repeated line.
inline std::string corpus() {
  const char* words[] = {"the",  "model", "reads", "each", "token", "and",   "predicts", "next",
                         "byte", "of",    "text",  "from", "a",     "small", "window",   "while"};
  std::string text;
  uint32_t x = 12345;
  for (int sentence = 0; sentence < 260; ++sentence) {
    for (int w = 0; w < 6; ++w) {
      x = x * 1664525u + 1013904223u;
      text += words[(x >> 24) % 16];
      text += w == 5 ? ".\n" : " ";
    }
  }
  return text;
}

inline std::string gptJob(const std::string& run_dir, const std::string& text, int threads,
                          const std::string& extra = "") {
  return "[job]\nname = \"tiny_gpt\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 3\nthreads = " + std::to_string(threads) +
         "\n[model]\npreset = \"gpt\"\nlayers = 2\nheads = 2\ndim = 16\ncontext = 16\ndropout = 0.1\n"
         "[data]\ndataset = \"text\"\nfiles = \"" +
         text +
         "\"\ncontext = 16\nvalidation_fraction = 0.1\n"
         "[train]\nsteps = 60\nbatch_size = 12\neval_batch_size = 64\neval_every_epoch = false\n"
         "checkpoint_every_steps = 10\nkeep_last = 20\n"
         "[optimizer]\ntype = \"adamw\"\nlr = 0.01\nweight_decay = 0.01\n" +
         extra;
}

// A `dtrain train JOB -q` command line of `steps` steps with plain SGD (lr
// 0.1, no weight decay) in place of the job's AdamW, then `more`. The runs
// these tests compare differ in the order of their float sums (threads,
// workers, micro-batches, stages, a GPU), which SGD carries through
// unamplified; AdamW's division by sqrt(v) would magnify the rounding of
// gradients near zero up to the learning rate.
inline std::vector<std::string> trainWithSgd(const std::string& job, int steps,
                                             const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {"train",
                                   job,
                                   "-q",
                                   "--set",
                                   "optimizer.type=sgd",
                                   "--set",
                                   "optimizer.lr=0.1",
                                   "--set",
                                   "optimizer.weight_decay=0",
                                   "--set",
                                   "train.steps=" + std::to_string(steps)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace dtrain::testing
