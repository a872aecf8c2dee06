// Each worker's memory, predicted from the job before any process starts
// (strategies/worker_memory.h): `dtrain check` prints it, and `dtrain train`
// and `resume` refuse a job that would not fit the workers' limit ([job]
// memory_limit_mb, or the memory cgroup's limit shared by the host's workers).
#pragma once
#include <string>

#include "core/config/job_config.h"
#include "core/nn/model.h"

namespace dtrain::cli {

// "# memory per worker (2 workers x 1 thread): parameters ..." and the limit
// it is checked against; "" for a pipeline or a parameter server (their
// stages and shards are planned apart).
std::string describeMemoryPlan(const JobConfig& job, const Model& model);
// Throws ConfigError when the job's workers would not fit their limit.
void checkMemoryBeforeStart(const JobConfig& job);

}  // namespace dtrain::cli
