#include "strategies/central_storage.h"

#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/optim/loss_scaler.h"
#include "core/optim/optimizer.h"
#include "core/train/step_profile.h"
#include "strategies/batch_norm_across_workers.h"

namespace dtrain {

namespace {

// The rank that holds the variables and runs the update: the chief, whose
// broadcasts (GroupStrategy's) are the holder's.
constexpr int kHolder = 0;

}  // namespace

CentralStorageStrategy::CentralStorageStrategy(std::shared_ptr<ProcessGroup> group)
    : GroupStrategy(std::move(group)) {}

CentralStorageStrategy::~CentralStorageStrategy() = default;

void CentralStorageStrategy::sumOntoHolder(float* grads, int64_t n) {
  // Rank 0's segment is the whole range, the others' are empty: only the
  // holder needs the sum. (The groups of this build carry an uneven
  // reduce-scatter as an all-reduce; a reduce to one rank would move less.)
  std::vector<int64_t> counts(static_cast<size_t>(worldSize()), 0);
  counts[kHolder] = n;
  group_->reduceScatterSum(grads, counts);
}

void CentralStorageStrategy::attach(const TrainingParts& parts) {
  // A single worker combines with nobody: its steps may be recorded whole.
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/worldSize() == 1);
  // The optimizer state lives on the holder alone: the others' copy (which
  // shareChiefState filled) is released, and an update there would throw.
  if (rank() != kHolder) parts.optimizer->init(0, parts.device);
  gradients_ = std::make_unique<GradientSum>(*local_, *group_,
                                             [this](float* grads, int64_t n) { sumOntoHolder(grads, n); });
}

std::string CentralStorageStrategy::describeRun() const {
  if (worldSize() == 1) return local_ ? local_->describe() : "";
  return " per worker, " + std::to_string(worldSize()) + " workers, variables and optimizer on rank 0, " +
         "gradients summed onto rank 0 " + gradients_->describe() +
         ", parameters broadcast after each update, over " + group_->describe();
}

StepFigures CentralStorageStrategy::step(const StepInput& in) {
  if (!local_) throw Error("central_storage: step before attach");
  if (worldSize() == 1) return local_->runAlone(in);
  // Synchronised statistics need samples in every worker's every
  // micro-batch; an epoch's last global batch smaller than that is skipped
  // by all alike.
  if (gradients_->syncsBatchStats() &&
      in.batch.global_size < worldSize() * local_->parts().job->train.accumulate)
    return StepFigures{};
  const BatchFigures f = gradients_->compute(in);
  // The holder clips and updates; the others drop their (partial) gradients.
  LossScaler* scaler = local_->parts().loss_scaler;
  const int64_t skipped_before = scaler ? scaler->state().skipped_steps : 0;
  StepFigures out = rank() == kHolder ? local_->update(in, f) : local_->skipUpdate(f);
  PhaseSpan span(local_->parts().profile, DevicePhase::Communication);
  ParamStore& store = local_->parts().replicas->store();
  group_->broadcast(store.params().data(), store.size(), kHolder);
  if (lossScaled(local_->parts())) {
    // fp16: the holder alone saw the summed gradients; the others take its
    // overflow decision, so every worker keeps the same loss scale.
    float finite = scaler->state().skipped_steps == skipped_before ? 1.0f : 0.0f;
    group_->broadcast(&finite, 1, kHolder);
    if (rank() != kHolder) settleLossScale(local_->parts(), in, finite == 1.0f, out);
  }
  return out;
}

void CentralStorageStrategy::agreeOnBuffers(ParamStore& buffers) {
  averageBuffers(*group_, buffers, gradients_ && gradients_->syncsBatchStats());
}

}  // namespace dtrain
