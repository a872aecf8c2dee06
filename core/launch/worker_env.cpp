#include "core/launch/worker_env.h"

#include <algorithm>
#include <cstdlib>

#include "core/errors.h"

namespace dtrain {
namespace {

constexpr const char* kCoordinator = "DTRAIN_WORKER_COORDINATOR";
constexpr const char* kToken = "DTRAIN_WORKER_TOKEN";
constexpr const char* kJob = "DTRAIN_WORKER_JOB";
constexpr const char* kNode = "DTRAIN_WORKER_NODE";
constexpr const char* kSlot = "DTRAIN_WORKER_SLOT";
constexpr const char* kAddress = "DTRAIN_WORKER_ADDRESS";
constexpr const char* kLocalWorkers = "DTRAIN_WORKER_LOCAL_WORKERS";

std::string required(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw ConfigError(std::string("worker environment: ") + name + " is not set");
  return v;
}

int index(const char* name) {
  std::string v = required(name);
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 1000000)
    throw ConfigError(std::string("worker environment: ") + name + " must be a non-negative integer (got \"" +
                      v + "\")");
  return static_cast<int>(n);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> workerEnvironment(const WorkerAssignment& a) {
  return {{kCoordinator, a.coordinator},
          {kToken, a.token},
          {kJob, a.job_id},
          {kNode, std::to_string(a.node)},
          {kSlot, std::to_string(a.slot)},
          {kAddress, a.address},
          {kLocalWorkers, std::to_string(a.local_workers)},
          // Each compute thread calls OpenBLAS single-threaded (ReplicaSet),
          // so its thread pool is never used; started anyway, its idle
          // threads spin for a while and slowed the first 30 steps of a
          // 2-rank run on 2 cores by 5 to 10%. Read only at library load.
          {"OPENBLAS_NUM_THREADS", "1"}};
}

bool startedAsWorker() { return std::getenv(kCoordinator) != nullptr; }

std::optional<WorkerAssignment> workerAssignmentFromEnv() {
  if (!std::getenv(kCoordinator)) return std::nullopt;
  WorkerAssignment a;
  a.coordinator = required(kCoordinator);
  a.token = required(kToken);
  a.job_id = required(kJob);
  a.node = index(kNode);
  a.slot = index(kSlot);
  a.address = required(kAddress);
  a.local_workers = std::max(1, index(kLocalWorkers));
  // Children of this worker (none today) must not think they are workers too.
  for (const char* name : {kCoordinator, kToken, kJob, kNode, kSlot, kAddress, kLocalWorkers})
    ::unsetenv(name);
  return a;
}

}  // namespace dtrain
