#include "strategies/mirrored.h"

#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/train/step_profile.h"
#include "strategies/batch_norm_across_workers.h"
#include "strategies/gradient_buckets.h"

namespace dtrain {

MirroredStrategy::MirroredStrategy(std::string name, std::shared_ptr<ProcessGroup> group)
    : name_(std::move(name)), group_(std::move(group)) {}

MirroredStrategy::~MirroredStrategy() = default;

void MirroredStrategy::broadcastParameters(float* params, int64_t n) { group_->broadcast(params, n, 0); }

void MirroredStrategy::broadcastFromChief(void* data, int64_t bytes) {
  group_->broadcastBytes(static_cast<uint8_t*>(data), bytes, 0);
}

void MirroredStrategy::reduceFigures(double* values, int64_t n) { group_->allReduceSum(values, n); }

void MirroredStrategy::reduceGradients(float* grads, int64_t n) { group_->allReduceSum(grads, n); }

bool MirroredStrategy::syncsBatchStats() const {
  return dtrain::syncsBatchStats(local_->parts(), worldSize());
}

void MirroredStrategy::attach(const TrainingParts& parts) {
  // A single rank combines with nobody: its steps may be recorded whole.
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/worldSize() == 1);
  ReplicaSet& replicas = *parts.replicas;
  if (syncsBatchStats()) {
    // The statistics are summed mid-pass through the ranks' collectives,
    // which the overlapped gradient reduction would use at the same time:
    // gradients are then reduced after backward instead.
    sumBatchStatsOver(*group_, replicas);
    return;
  }
  if (worldSize() == 1) return;
  // Gradients of the last layers travel while backward computes the first.
  constexpr int64_t kFirstBucketBytes = 1 << 20;
  const auto bucket_bytes = static_cast<int64_t>(parts.job->strategy.bucket_mb * (1 << 20));
  std::vector<GradientBucket> buckets =
      planGradientBuckets(replicas.model(), replicas.store(), bucket_bytes, kFirstBucketBytes);
  const int nodes = static_cast<int>(replicas.model().nodes().size());
  reducer_ = std::make_unique<OverlappedReducer>(
      std::move(buckets), replicas.threads(), nodes, [this, &replicas](int64_t begin, int64_t end) {
        replicas.sumGradients(begin, end);
        reduceGradients(replicas.grads().data() + begin, end - begin);
      });
}

std::string MirroredStrategy::describeRun() const {
  if (worldSize() == 1) return local_ ? local_->describe() : "";
  if (!reducer_) return "";
  return " per rank, " + std::to_string(worldSize()) + " ranks, gradients all-reduced in " +
         std::to_string(reducer_->buckets().size()) + " buckets during backward, over " + group_->describe();
}

StepFigures MirroredStrategy::step(const StepInput& in) {
  if (!local_) throw Error(name_ + ": step before attach");
  if (worldSize() == 1) return local_->runAlone(in);
  // Synchronised statistics need samples on every rank; an epoch's last
  // global batch smaller than the rank count is skipped by all ranks alike.
  if (syncsBatchStats() && in.batch.global_size < worldSize()) return StepFigures{};
  StepProfile* profile = local_->parts().profile;
  BatchFigures f;
  if (reducer_) {
    reducer_->beginStep();
    try {
      f = local_->computeGradients(in, reducer_.get());
    } catch (...) {
      reducer_->cancel();
      throw;
    }
    PhaseSpan span(profile, DevicePhase::Communication);  // what backward did not hide
    reducer_->finish();                                   // summed over replicas and ranks
  } else {
    f = local_->computeGradients(in, nullptr);
    local_->sumReplicas();
    PhaseSpan span(profile, DevicePhase::Communication);
    ReplicaSet& replicas = *local_->parts().replicas;
    reduceGradients(replicas.grads().data(), replicas.store().size());
  }
  return local_->update(in, f);
}

void MirroredStrategy::agreeOnBuffers(ParamStore& buffers) {
  averageBuffers(*group_, buffers, syncsBatchStats());
}

}  // namespace dtrain
