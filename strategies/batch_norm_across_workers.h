// Batch normalisation's state across the worker processes of a strategy that
// trains with several (mirrored, central_storage, parameter_server): with
// [strategy] sync_batchnorm the batch statistics are summed over the workers
// during the passes; otherwise each worker normalises by its own slice and
// the running statistics are averaged before they are evaluated or saved, as
// tf.distribute reads per-replica batch-norm moments.
#pragma once
#include "core/comm/process_group.h"
#include "core/train/strategy.h"

namespace dtrain {

// Whether the job's batch statistics are summed over the workers.
bool syncsBatchStats(const TrainingParts& parts, int workers);
// Makes the replicas sum their batch statistics over `workers` mid-pass.
void sumBatchStatsOver(ProcessGroup& workers, ReplicaSet& replicas);
// Every worker's running statistics replaced by their mean (collective);
// nothing to do with one worker, no buffers, or synchronised statistics.
void averageBuffers(ProcessGroup& workers, ParamStore& buffers, bool synchronised);

}  // namespace dtrain
