#include "cli/memory_check.h"

#include <algorithm>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/precision.h"
#include "core/train/trainer.h"
#include "datasets/dataset_info.h"
#include "models/model_builder.h"
#include "strategies/worker_memory.h"

namespace dtrain::cli {

namespace {

struct Workers {
  int total = 1, local = 1, threads = 1;
};

Workers workersOf(const JobConfig& job) {
  Workers w;
  if (job.strategy.type != "one_device") {
    w.total = w.local = job.strategy.workers;
    if (job.cluster.present && !job.cluster.hosts.empty()) {
      w.total = w.local = 0;
      for (const ClusterHost& h : job.cluster.hosts) {
        w.total += h.slots;
        w.local = std::max(w.local, h.slots);
      }
    }
  }
  // As a launched worker resolves threads = 0: the host's cores shared out.
  w.threads = job.job.threads > 0 ? job.job.threads : std::max(1, resolveThreads(0) / std::max(1, w.local));
  return w;
}

bool planned(const JobConfig& job) {
  return job.strategy.type != "pipeline" && job.strategy.type != "parameter_server";
}

// The limit of one worker: the job's, or its share of the cgroup's.
int64_t limitOf(const JobConfig& job, const Workers& w) {
  const int64_t limit = workerMemoryLimit(job);
  return job.job.memory_limit_mb > 0 ? limit : limit / std::max(1, w.local);
}

}  // namespace

std::string describeMemoryPlan(const JobConfig& job, const Model& model) {
  if (!planned(job)) return "";
  const Workers w = workersOf(job);
  std::string text = "# memory per worker (" + std::to_string(w.total) +
                     (w.total == 1 ? " worker" : " workers") + " x " + std::to_string(w.threads) +
                     (w.threads == 1 ? " thread" : " threads") +
                     "): " + describeWorkerMemory(predictWorkerMemory(job, model, w.total, w.threads)) + "\n";
  const int64_t limit = limitOf(job, w);
  if (limit > 0) {
    try {
      checkWorkerMemoryFits(job, model, w.total, w.threads, limit);
      text += "# fits the limit of " + std::to_string(limit >> 20) + " MB per worker\n";
    } catch (const ConfigError& e) {
      text += std::string("# does not fit: ") + e.what() + "\n";
    }
  }
  return text;
}

void checkMemoryBeforeStart(const JobConfig& job) {
  if (!planned(job)) return;
  const Workers w = workersOf(job);
  const int64_t limit = limitOf(job, w);
  if (limit <= 0) return;
  const DatasetInfo data = peekDataset(job.data);
  auto model = buildModel(job.model, data.sample_shape, data.classes, builtinLayers());
  model->setPrecision(precisionNamed(job.job.precision));
  checkWorkerMemoryFits(job, *model, w.total, w.threads, limit);
}

}  // namespace dtrain::cli
