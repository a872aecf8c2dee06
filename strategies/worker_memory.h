// What one worker of a job will hold, predicted before it runs (`dtrain
// check`, and each worker at start-up against its memory limit): the training
// state as the strategy lays it out (parameters, gradients, optimizer state)
// and the activations of its passes, in bytes.
//
// Per worker, n parameters, N workers, T compute threads (replicas):
//   parameters   4n (stage 3: 4n/N plus the two layer groups in use)
//   gradients    4n per replica (stages 2, 3: 4n/N plus the groups in flight)
//   optimizer    SGD momentum 4n, Adam 8n (sharded: /N; central_storage: on
//                rank 0 alone; a parameter server's: on its shards)
//   activations  each replica's activations and their gradients for its
//                largest pass: an evaluation piece of batch_size / T samples
// A pipeline's stages and the parameter server's shards are sized by their
// own planners (`dtrain check` prints those).
#pragma once
#include <cstdint>
#include <string>

#include "core/config/job_config.h"
#include "core/nn/model.h"

namespace dtrain {

struct WorkerMemory {
  int64_t params = 0, grads = 0, optimizer = 0, activations = 0;
  int64_t total() const { return params + grads + optimizer + activations; }
};

// `workers`: the run's worker processes; `threads`: compute threads each.
WorkerMemory predictWorkerMemory(const JobConfig& job, const Model& model, int workers, int threads);

// "parameters 193.2 MB, gradients 96.6 MB, optimizer state 193.2 MB, activations 80.0 MB: 563.0 MB".
std::string describeWorkerMemory(const WorkerMemory& m);
// The same without the total.
std::string describeWorkerMemoryParts(const WorkerMemory& m);

// The memory one worker may use: [job] memory_limit_mb when given, else the
// limit of the process's memory cgroup (v2 memory.max, v1
// memory.limit_in_bytes) when one is set; 0 = none known.
int64_t workerMemoryLimit(const JobConfig& job);

// Throws ConfigError (one line: the predicted bytes, the limit, and a
// setting that would fit, when one would) when `m` does not fit `limit`.
void checkWorkerMemoryFits(const JobConfig& job, const Model& model, int workers, int threads, int64_t limit);

}  // namespace dtrain
