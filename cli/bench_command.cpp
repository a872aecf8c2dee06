#include "cli/bench_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/distributed_run.h"
#include "core/bench/allreduce_timing.h"
#include "core/comm/gloo_process_group.h"
#include "core/comm/hierarchical_process_group.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "core/errors.h"
#include "core/io/json.h"
#include "core/launch/worker_session.h"
#include "datasets/batch_loader.h"
#include "datasets/byte_batches.h"
#include "datasets/dataset.h"
#include "datasets/loader_options.h"
#include "datasets/loader_timing.h"
#include "datasets/sampler.h"

namespace dtrain::cli {
namespace {

constexpr double kBytesPerMb = 1e6;
// Batches taken before the timing starts: the threads have started, the
// buffers exist and the pipeline is full, as in the middle of training.
constexpr int64_t kLoaderWarmupBatches = 2;
constexpr int64_t kLoaderDefaultBatches = 50;

int64_t elementsOf(const BenchAllreduceArgs& args) {
  auto n = static_cast<int64_t>(args.mb * kBytesPerMb / sizeof(float));
  if (n < 1)
    throw ConfigError("--mb " + jsonNumber(args.mb) +
                      " is less than one float32 (4 bytes); use a larger --mb");
  return n;
}

// The job the ranks run under: a mirrored run of `ranks` workers on this
// host, as `dtrain train` would make for [strategy] type = "mirrored"; with
// --job, that job's hosts and workers (a multi_worker_mirrored [cluster]).
JobConfig benchJob(const BenchAllreduceArgs& args) {
  if (!args.job_file.empty()) {
    JobConfig job = parseJobFile(args.job_file);
    validateJob(job);
    job.strategy.collective = args.collective;  // ring_chunked too, which training does not name
    if (job.strategy.type != "multi_worker_mirrored")
      throw ConfigError(args.job_file + ": [strategy] type is '" + job.strategy.type +
                        "'; bench allreduce --job measures a multi_worker_mirrored job's hosts");
    return job;
  }
  JobConfig job;
  job.job.name = "bench_allreduce";
  job.job.threads = 1;
  job.strategy.type = "mirrored";
  job.strategy.workers = args.ranks;
  job.strategy.collective = args.collective;
  // A rank that cannot start shows at once (the host sees it exit); this
  // bounds only a rank that starts and never joins.
  job.cluster.join_timeout_s = 60;
  return job;
}

// The command each rank runs: this one, so it measures the same thing.
std::vector<std::string> rankCommand(const BenchAllreduceArgs& args) {
  std::vector<std::string> c = {"bench",        "allreduce",
                                "--ranks",      std::to_string(args.ranks),
                                "--mb",         jsonNumber(args.mb),
                                "--iters",      std::to_string(args.iters),
                                "--warmup",     std::to_string(args.warmup),
                                "--collective", args.collective};
  if (args.json) c.push_back("--json");
  if (!args.job_file.empty()) c.insert(c.end(), {"--job", args.job_file});
  return c;
}

// What carried the all-reduce: "shared_memory", "hierarchical", or the Gloo algorithm run.
std::string algorithmOf(const ProcessGroup& group, const BenchAllreduceArgs& args, int world, int64_t bytes) {
  if (dynamic_cast<const HierarchicalProcessGroup*>(&group) != nullptr) return "hierarchical";
  if (dynamic_cast<const GlooProcessGroup*>(&group) == nullptr) return "shared_memory";
  return GlooProcessGroup::allReduceAlgorithmFor(args.collective, world, bytes);
}

void report(const BenchAllreduceArgs& args, const ProcessGroup& group, int64_t elements,
            const AllReduceTiming& t) {
  const int world = group.size();
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  const std::string algorithm = algorithmOf(group, args, world, bytes);
  const std::string tcp = args.job_file.empty() ? "on loopback, " : "over TCP, ";
  const std::string carrier = algorithm == "shared_memory"  ? "in shared memory"
                              : algorithm == "hierarchical" ? "over " + group.describe()
                                                            : tcp + "gloo " + algorithm;
  // Algorithm bandwidth: the message over the time, as nccl-tests and
  // Gloo's own benchmark report it.
  const double gb_per_s = t.median() > 0 ? static_cast<double>(bytes) / t.median() / 1e9 : 0.0;
  if (args.json) {
    std::vector<double> ms;
    for (double s : t.seconds) ms.push_back(s * 1e3);
    JsonWriter w;
    w.add("ranks", world);
    w.add("bytes", bytes);
    w.add("elements", elements);
    w.add("collective", args.collective);
    w.add("algorithm", algorithm);
    w.add("warmup", args.warmup);
    w.add("iters", args.iters);
    w.add("median_ms", t.median() * 1e3);
    w.add("min_ms", t.min() * 1e3);
    w.add("max_ms", t.max() * 1e3);
    w.add("algorithm_gb_per_s", gb_per_s);
    w.add("times_ms", ms);
    w.add("verified", true);
    std::printf("%s\n", w.str().c_str());
  } else {
    std::printf(
        "all-reduce of %g MB (%lld float32) between %d ranks %s: median %.2f ms, "
        "min %.2f ms, max %.2f ms over %d calls after %d warm-up; %.2f GB/s; every result verified\n",
        static_cast<double>(bytes) / kBytesPerMb, static_cast<long long>(elements), world, carrier.c_str(),
        t.median() * 1e3, t.min() * 1e3, t.max() * 1e3, args.iters, args.warmup, gb_per_s);
  }
  std::fflush(stdout);
}

// One rank: join as a mirrored run's worker does, measure, rank 0 reports.
int runRank(const BenchAllreduceArgs& args, const WorkerAssignment& assignment) {
  const JobConfig job = benchJob(args);
  WorkerSession session(job, assignment);
  try {
    ProcessGroup& group = *session.group();
    AllReduceTimingOptions o;
    o.elements = elementsOf(args);
    o.warmup = args.warmup;
    o.iters = args.iters;
    AllReduceTiming timing = timeAllReduce(group, o);
    if (session.rank() == 0) report(args, group, o.elements, timing);
    session.leave();
    return kExitOk;
  } catch (const std::exception& e) {
    // The others would otherwise wait for this rank at the next barrier.
    std::string what = "rank " + std::to_string(session.rank()) + ": " + e.what();
    session.abort(what);
    throw Error(what);
  }
}

}  // namespace

CLI::App* addBenchCommand(CLI::App& app, BenchAllreduceArgs& args) {
  auto* bench = app.add_subcommand("bench", "Measure collective or data loader speed");
  bench->require_subcommand(1);
  auto* allreduce = bench->add_subcommand(
      "allreduce",
      "Time an all-reduce of float32 between worker processes on this host, or on a job's hosts (--job)");
  allreduce->add_option("--ranks", args.ranks, "Worker processes (default 2)")
      ->check(CLI::Range(2, kAllReduceTimingMaxRanks));
  allreduce->add_option("--mb", args.mb, "Message size per rank in MB of 10^6 bytes (default 100)")
      ->check(CLI::PositiveNumber);
  allreduce->add_option("--iters", args.iters, "Timed calls (default 10)")->check(CLI::Range(1, 500));
  allreduce->add_option("--warmup", args.warmup, "Untimed calls first (default 2)")
      ->check(CLI::Range(0, 100));
  allreduce
      ->add_option("--collective", args.collective,
                   "What carries it: auto (what training picks: shared memory on one host, across hosts "
                   "hierarchical when a host runs several ranks), shared_memory, hierarchical (shared "
                   "memory inside each host, Gloo between one leader per host), or a Gloo algorithm over "
                   "TCP: ring, ring_chunked, halving_doubling or bcube")
      ->check(CLI::IsMember(
          {"auto", "shared_memory", "hierarchical", "ring", "ring_chunked", "halving_doubling", "bcube"}));
  allreduce->add_flag("--json", args.json, "Print one JSON object (times in ms) instead of a sentence");
  allreduce->add_option("--job", args.job_file,
                        "A multi_worker_mirrored job whose [cluster] places the ranks on its hosts; run the "
                        "same command on each host (--ranks is then the job's)");
  allreduce->add_option("--node", args.node, "This host's node in the job's [cluster] (default: by address)")
      ->check(CLI::Range(0, 4095));
  return allreduce;
}

int runBenchAllreduce(const BenchAllreduceArgs& args) {
  elementsOf(args);  // a bad size is reported once, by the host, before any rank starts
  if (auto assignment = workerAssignmentFromEnv()) return runRank(args, *assignment);
  return runHostProcesses(benchJob(args), rankCommand(args), TrainerOptions{}, args.node);
}

CLI::App* addBenchLoaderCommand(CLI::App& app, BenchLoaderArgs& args) {
  auto* loader = app.get_subcommand("bench")->add_subcommand(
      "loader", "Time the job's training data loader alone (decode, augment, normalise): images per second");
  loader->add_option("job", args.job_file, "Job file (TOML)")->required();
  loader->add_option("--set", args.overrides, "Override a job key: --set data.loader_threads=4")->take_all();
  loader->add_option("--batches", args.batches, "Timed global batches (default: 50 or one epoch, if fewer)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  loader->add_option("--threads", args.threads, "Loader threads (default: the job's [data] loader_threads)")
      ->check(CLI::Range(1, 256));
  loader->add_flag("--json", args.json, "Print one JSON object instead of a sentence");
  return loader;
}

int runBenchLoader(const BenchLoaderArgs& args) {
  JobConfig job = parseJobFile(args.job_file, args.overrides);
  validateJob(job);
  if (args.threads > 0) job.data.loader_threads = args.threads;
  const auto data = openDataset(job.data, Split::Train, job.job.seed);
  const Sampler sampler(data->size(), job.job.seed, job.data.shuffle);
  LoaderOptions options =
      loaderOptionsFor(job.data, *data, Split::Train, job.job.seed, Shard{}, /*pinned=*/false);
  options.low_priority = false;  // measured alone, not yielding to compute threads: its own speed
  BatchLoader loader(*data, sampler, job.train.batch_size, options);
  const int64_t batches =
      args.batches > 0 ? args.batches : std::min<int64_t>(kLoaderDefaultBatches, loader.batchesPerEpoch());
  const LoaderThroughput t = timeLoader(loader, kLoaderWarmupBatches, batches);
  // A GPU run's loader hands out bytes and draws where it can (the device
  // normalises and augments): that host work is timed too, so the figure a
  // GPU run is fed at is the one shown.
  const std::string refusal = byteBatchesRefusal(*data, options.augmentation);
  LoaderThroughput bytes;
  if (refusal.empty()) {
    LoaderOptions byte_options = options;
    byte_options.form = BatchForm::Bytes;
    BatchLoader byte_loader(*data, sampler, job.train.batch_size, byte_options);
    bytes = timeLoader(byte_loader, kLoaderWarmupBatches, batches);
  }
  if (args.json) {
    JsonWriter w;
    w.add("images_per_s", t.imagesPerSecond());
    w.add("threads", loader.threads());
    w.add("images", t.images);
    w.add("batches", t.batches);
    w.add("batch_size", job.train.batch_size);
    w.add("warmup", kLoaderWarmupBatches);
    w.add("seconds", t.seconds);
    w.add("dataset", job.data.dataset);
    w.add("gpu_batches", refusal.empty() ? "bytes" : "floats");
    if (refusal.empty()) w.add("bytes_images_per_s", bytes.imagesPerSecond());
    std::printf("%s\n", w.str().c_str());
  } else {
    std::printf(
        "loader: %.1f images/s with %d thread%s (%lld images in %lld batches of %lld after %lld warm-up; "
        "%s)\n",
        t.imagesPerSecond(), loader.threads(), loader.threads() == 1 ? "" : "s",
        static_cast<long long>(t.images), static_cast<long long>(t.batches),
        static_cast<long long>(job.train.batch_size), static_cast<long long>(kLoaderWarmupBatches),
        data->describe().c_str());
    if (refusal.empty())
      std::printf(
          "a GPU run's batches cross as bytes and are normalised and augmented on the GPU: %.1f images/s of "
          "bytes and draws (%lld images; the training split stays on the GPU when it fits [data] "
          "device_cache_mb)\n",
          bytes.imagesPerSecond(), static_cast<long long>(bytes.images));
    else
      std::printf("a GPU run's batches take this float path too (%s)\n", refusal.c_str());
  }
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace dtrain::cli
