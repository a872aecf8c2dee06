#include "strategies/mirrored.h"

#include <utility>
#include <vector>

#include "core/errors.h"
#include "strategies/batch_norm_across_workers.h"

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

void MirroredStrategy::attach(const TrainingParts& parts) {
  // A single rank combines with nobody: its steps may be recorded whole.
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/worldSize() == 1);
  gradients_ = std::make_unique<GradientSum>(*local_, *group_,
                                             [this](float* grads, int64_t n) { reduceGradients(grads, n); });
}

std::string MirroredStrategy::describeRun() const {
  if (worldSize() == 1) return local_ ? local_->describe() : "";
  return " per rank, " + std::to_string(worldSize()) + " ranks, gradients all-reduced " +
         gradients_->describe() + ", over " + group_->describe();
}

StepFigures MirroredStrategy::step(const StepInput& in) {
  if (!local_) throw Error(name_ + ": step before attach");
  if (worldSize() == 1) return local_->runAlone(in);
  // Synchronised statistics need samples on every rank; an epoch's last
  // global batch smaller than the rank count is skipped by all ranks alike.
  if (gradients_->syncsBatchStats() && in.batch.global_size < worldSize()) return StepFigures{};
  return local_->update(in, gradients_->compute(in));
}

void MirroredStrategy::agreeOnBuffers(ParamStore& buffers) {
  averageBuffers(*group_, buffers, gradients_ && gradients_->syncsBatchStats());
}

}  // namespace dtrain
