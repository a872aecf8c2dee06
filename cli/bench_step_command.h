// `dtrain bench step JOB`: trains the job's model for a few steps in this
// process and says where a step's time goes: each layer's forward and
// backward (CUDA events on a GPU, the wall clock on the CPU) with the
// convolution algorithms chosen, the batch's copy to the device, the loss,
// the optimizer update, communication, and the host's waits for data and for
// the device. Writes nothing to the run directory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dtrain::cli {

struct BenchStepArgs {
  std::string job_file;
  std::vector<std::string> overrides;  // --set, as for `dtrain train`
  int64_t steps = 20;                  // timed steps
  int64_t warmup = 5;                  // steps run first and not timed
  bool json = false;
};

// Adds the `step` subcommand to the `bench` command addBenchCommand added to
// `app` (call that first); returns it. `args` must outlive the parse.
CLI::App* addBenchStepCommand(CLI::App& app, BenchStepArgs& args);

int runBenchStep(const BenchStepArgs& args);

}  // namespace dtrain::cli
