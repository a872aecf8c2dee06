// `dtrain bench cpu`: this CPU's ceilings (core/bench/cpu_ceiling.h): the
// register-resident rates of each kernel level's arithmetic, and a dense
// stack's matrix products alone at its training shapes by each level's
// kernels, as images per second: what the CPU benchmarks' figures are read
// against.
#pragma once
#include <cstdint>
#include <vector>

namespace CLI {
class App;
}

namespace dtrain::cli {

struct BenchCpuArgs {
  std::vector<int64_t> widths = {784, 512, 256, 10};  // the mlp preset on Fashion-MNIST
  int64_t batch = 128;    // global batch, split over the threads as training splits it
  int threads = 0;        // 0 = one per core
  double seconds = 1.0;   // per figure
  bool json = false;
};

// Adds the `cpu` subcommand to the `bench` command addBenchCommand added.
CLI::App* addBenchCpuCommand(CLI::App& app, BenchCpuArgs& args);

int runBenchCpu(const BenchCpuArgs& args);

}  // namespace dtrain::cli
