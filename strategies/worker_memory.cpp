#include "strategies/worker_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "core/nn/param_store.h"
#include "strategies/sharded/layer_groups.h"

namespace dtrain {

namespace {

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// Stage 3's gathered parameters besides the own shard: the two largest
// layer groups the passes hold at once, and a tied weight's group kept
// through the step (strategies/sharded/layer_groups.h, as a run plans them).
struct GroupSizes {
  int64_t two_largest = 0, tied = 0;
};
GroupSizes layerGroupSizes(const Model& model, const ParamStore& layout, int64_t min_bytes) {
  std::vector<int64_t> sizes;
  GroupSizes out;
  for (const LayerGroup& g : planLayerGroups(model, layout, min_bytes).groups) {
    sizes.push_back(g.end - g.begin);
    if (g.pinned) out.tied += g.end - g.begin;
  }
  std::sort(sizes.rbegin(), sizes.rend());
  for (size_t k = 0; k < sizes.size() && k < 2; ++k) out.two_largest += sizes[k];
  return out;
}

int64_t readLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const long long v = std::stoll(text);
    return v >= (int64_t(1) << 60) ? 0 : v;  // cgroup v1 writes "no limit" as a huge number
  } catch (...) {
    return 0;
  }
}

}  // namespace

WorkerMemory predictWorkerMemory(const JobConfig& job, const Model& model, int workers, int threads) {
  const std::string& type = job.strategy.type;
  ParamStore layout;  // offsets only: nothing is allocated
  model.registerParams(layout);
  const int64_t n = layout.size();
  const int shards = type == "sharded" ? std::max(1, workers) : 1;
  const int stage = type == "sharded" && workers > 1 ? job.strategy.stage : 0;
  const int64_t own = (n + shards - 1) / shards;
  const auto bucket_bytes = static_cast<int64_t>(job.strategy.bucket_mb * (1 << 20));
  const GroupSizes groups = layerGroupSizes(model, layout, bucket_bytes);
  WorkerMemory m;
  m.params = 4 * (stage == 3 ? own + groups.two_largest + groups.tied : n);
  if (job.job.device == "cuda" && (job.job.precision == "bf16" || job.job.precision == "fp16"))
    m.params += 2 * n;  // the products' 16-bit copy
  m.grads = 4 * (stage >= 2 ? own + groups.two_largest : n * std::max(1, threads));
  int64_t per_parameter = 0;  // optimizer state floats per parameter
  if (job.optimizer.type == "adam" || job.optimizer.type == "adamw") per_parameter = 2;
  if (job.optimizer.type == "sgd" && job.optimizer.momentum != 0) per_parameter = 1;
  if (type == "parameter_server") per_parameter = 0;  // on the shards
  m.optimizer = 4 * per_parameter * (stage >= 1 ? own : n);
  const int t = std::max(1, threads);
  const int64_t capacity = (job.train.batch_size + t - 1) / t;
  m.activations = t * model.plannedActivationBytes(capacity);
  return m;
}

std::string describeWorkerMemory(const WorkerMemory& m) {
  return describeWorkerMemoryParts(m) + ": " + megabytes(m.total());
}

std::string describeWorkerMemoryParts(const WorkerMemory& m) {
  return "parameters " + megabytes(m.params) + ", gradients " + megabytes(m.grads) + ", optimizer state " +
         megabytes(m.optimizer) + ", activations " + megabytes(m.activations);
}

int64_t workerMemoryLimit(const JobConfig& job) {
  if (job.job.memory_limit_mb > 0) return static_cast<int64_t>(job.job.memory_limit_mb * (1 << 20));
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    // "4:memory:/path" (v1) or "0::/path" (v2).
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1),
                      path = line.substr(second + 1);
    int64_t limit = 0;
    if (controllers == "memory") {
      limit = readLimit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
      if (limit == 0) limit = readLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    } else if (controllers.empty()) {
      limit = readLimit("/sys/fs/cgroup" + path + "/memory.max");
    }
    if (limit > 0) return limit;
  }
  return 0;
}

void checkWorkerMemoryFits(const JobConfig& job, const Model& model, int workers, int threads,
                           int64_t limit) {
  if (limit <= 0) return;
  const WorkerMemory m = predictWorkerMemory(job, model, workers, threads);
  if (m.total() <= limit) return;
  std::string fix;
  if (workers > 1 && job.strategy.type != "pipeline" && job.strategy.type != "parameter_server") {
    JobConfig other = job;
    other.strategy.type = "sharded";
    for (int stage = job.strategy.type == "sharded" ? job.strategy.stage + 1 : 1; stage <= 3 && fix.empty();
         ++stage) {
      other.strategy.stage = stage;
      const int t = stage == 3 ? 1 : threads;
      if (predictWorkerMemory(other, model, workers, t).total() <= limit)
        fix = "; [strategy] type = \"sharded\" with stage = " + std::to_string(stage) +
              (t != threads ? " and job.threads = 1" : "") + " would fit";
    }
  }
  if (fix.empty())
    fix =
        "; use more workers with [strategy] type = \"sharded\", stage = 3, a smaller batch_size, or more "
        "memory";
  throw ConfigError("a worker needs about " + megabytes(m.total()) + " (" + describeWorkerMemoryParts(m) +
                    "), more than its memory limit of " + megabytes(limit) + fix);
}

}  // namespace dtrain
