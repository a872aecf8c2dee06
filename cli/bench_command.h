// `dtrain bench allreduce`: measures collective speed between worker
// processes on this host, started and connected exactly as a mirrored run's
// are (rendezvous on loopback, Gloo over TCP), so the figure is what a
// training step's gradient all-reduce gets. Rank 0 prints the result.
// `dtrain bench loader JOB`: measures the job's training input pipeline on its
// own (decoding, augmentation, normalisation; no model): images per second.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dtrain::cli {

struct BenchAllreduceArgs {
  int ranks = 2;
  double mb = 100.0;  // message size per rank in MB (10^6 bytes) of float32
  int iters = 10;
  int warmup = 2;
  std::string collective = "auto";  // a [strategy] collective value, or ring_chunked
  bool json = false;
  // Across hosts: a multi_worker_mirrored job whose [cluster] places the
  // ranks (each host runs the same command); --ranks is then the job's.
  std::string job_file;
  int node = -1;  // this host's node in the job's [cluster]; -1: found by address
};

// Adds `bench` with its `allreduce` subcommand to `app`; returns the
// `allreduce` subcommand (true after parsing when it was chosen). `args` is
// filled by the parse and must outlive it.
CLI::App* addBenchCommand(CLI::App& app, BenchAllreduceArgs& args);

// The host side starts the ranks and returns the run's exit code; a process
// started as one of the ranks measures and (rank 0) prints.
int runBenchAllreduce(const BenchAllreduceArgs& args);

struct BenchLoaderArgs {
  std::string job_file;
  std::vector<std::string> overrides;  // --set, as for `dtrain train`
  int64_t batches = 0;                 // timed global batches; 0: 50 or one epoch, whichever is fewer
  int threads = 0;                     // loader threads; 0: the job's [data] loader_threads
  bool json = false;
};

// Adds the `loader` subcommand to the `bench` command addBenchCommand added
// to `app` (call that first); returns it. `args` must outlive the parse.
CLI::App* addBenchLoaderCommand(CLI::App& app, BenchLoaderArgs& args);

// Opens the job's training data, runs its training loader (one process, the
// whole global batch) and prints the images per second.
int runBenchLoader(const BenchLoaderArgs& args);

}  // namespace dtrain::cli
