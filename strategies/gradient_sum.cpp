#include "strategies/gradient_sum.h"

#include <utility>
#include <vector>

#include "core/train/step_profile.h"
#include "strategies/batch_norm_across_workers.h"
#include "strategies/gradient_buckets.h"

namespace dtrain {

GradientSum::GradientSum(LocalStep& local, ProcessGroup& workers, Sum sum)
    : local_(local),
      sum_(std::move(sum)),
      syncs_batch_stats_(dtrain::syncsBatchStats(local.parts(), workers.size())) {
  ReplicaSet& replicas = *local.parts().replicas;
  if (syncs_batch_stats_) {
    // The statistics are summed mid-pass through the collectives, which an
    // overlapped gradient sum would use at the same time: the gradients are
    // then summed after backward instead.
    sumBatchStatsOver(workers, replicas);
    return;
  }
  if (workers.size() == 1) return;
  // Gradients of the last layers travel while backward computes the first.
  constexpr int64_t kFirstBucketBytes = 1 << 20;
  const auto bucket_bytes = static_cast<int64_t>(local.parts().job->strategy.bucket_mb * (1 << 20));
  std::vector<GradientBucket> buckets =
      planGradientBuckets(replicas.model(), replicas.store(), bucket_bytes, kFirstBucketBytes);
  const int nodes = static_cast<int>(replicas.model().nodes().size());
  reducer_ = std::make_unique<OverlappedReducer>(std::move(buckets), replicas.threads(), nodes,
                                                 [this, &replicas](int64_t begin, int64_t end) {
                                                   replicas.sumGradients(begin, end);
                                                   sum_(replicas.grads().data() + begin, end - begin);
                                                 });
}

GradientSum::~GradientSum() = default;

BatchFigures GradientSum::compute(const StepInput& in) {
  StepProfile* profile = local_.parts().profile;
  if (reducer_) {
    reducer_->beginStep();
    BatchFigures f;
    try {
      f = local_.computeGradients(in, reducer_.get());
    } catch (...) {
      reducer_->cancel();
      throw;
    }
    PhaseSpan span(profile, DevicePhase::Communication);  // what backward did not hide
    reducer_->finish();                                   // summed over replicas and workers
    return f;
  }
  const BatchFigures f = local_.computeGradients(in, nullptr);
  local_.sumReplicas();
  PhaseSpan span(profile, DevicePhase::Communication);
  ReplicaSet& replicas = *local_.parts().replicas;
  sum_(replicas.grads().data(), replicas.store().size());
  return f;
}

std::string GradientSum::describe() const {
  if (!reducer_) return "after backward";
  return "in " + std::to_string(reducer_->buckets().size()) + " buckets during backward";
}

}  // namespace dtrain
