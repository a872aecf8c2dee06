// Evaluation on a dataset split: every sample counted exactly once, in a
// fixed order, in inference mode. With several ranks each evaluates its
// `shard` of every batch and `reduce` sums the figures over the ranks, so
// every rank gets the result for the whole split. The samples are prepared as [data] says (normalisation,
// loader threads, prefetch), without the training augmentation.
#pragma once
#include <cstdint>
#include <functional>

#include "core/config/job_config.h"
#include "core/train/replica_set.h"
#include "datasets/dataset.h"
#include "datasets/loader_options.h"

namespace dtrain {

struct EvalResult {
  double loss = 0;      // mean over samples
  double accuracy = 0;  // fraction correct
  int64_t samples = 0;
  double seconds = 0;
};

// Throws ConfigError when [data] mean/std do not fit the dataset's channels.
// `reduce` (in place, a sum over the ranks) may be empty: one rank alone.
EvalResult evaluateDataset(ReplicaSet& replicas, const Dataset& data, int64_t batch_size,
                           const DataSection& data_config, Shard shard,
                           const std::function<void(double*, int64_t)>& reduce);
// The same with each batch's figures from `evaluate_batch` (a strategy that
// evaluates across its ranks); `pinned`: batches in pinned host memory.
EvalResult evaluateDataset(const std::function<BatchFigures(const Batch&)>& evaluate_batch, bool pinned,
                           const Dataset& data, int64_t batch_size, const DataSection& data_config,
                           Shard shard, const std::function<void(double*, int64_t)>& reduce);

}  // namespace dtrain
