// Evaluation on a dataset split: every sample counted exactly once, in a
// fixed order, in inference mode. With several ranks each evaluates its slice
// of every batch and the sums are reduced, so every rank gets the result for
// the whole split.
#pragma once
#include "core/train/replica_set.h"
#include "datasets/dataset.h"
#include "strategies/strategy.h"

namespace dtrain {

struct EvalResult {
  double loss = 0;      // mean over samples
  double accuracy = 0;  // fraction correct
  int64_t samples = 0;
  double seconds = 0;
};

EvalResult evaluateDataset(ReplicaSet& replicas, const Dataset& data, int64_t batch_size, int prefetch,
                           Strategy& strategy);

}  // namespace dtrain
