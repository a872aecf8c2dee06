#include "strategies/mirrored.h"

#include <csignal>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "strategies/batch_norm_across_workers.h"

namespace dtrain {

MirroredStrategy::MirroredStrategy(std::string name, std::shared_ptr<ProcessGroup> group, bool elastic)
    : GroupStrategy(std::move(group)), name_(std::move(name)), elastic_(elastic) {}

MirroredStrategy::~MirroredStrategy() = default;

void MirroredStrategy::reduceGradients(float* grads, int64_t n) { group_->allReduceSum(grads, n); }

void MirroredStrategy::attach(const TrainingParts& parts) {
  // A single rank combines with nobody: its steps may be recorded whole.
  // An elastic step agrees on its figures before its update: on a GPU they
  // are read at once (a wait for the device each step) instead of a step later.
  local_ = std::make_unique<LocalStep>(
      parts, /*record_graphs=*/worldSize() == 1 && !elastic_,
      elastic_ ? LocalStep::DeviceFigures::ReadBeforeUpdate : LocalStep::DeviceFigures::ReadLater);
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
  // An elastic run left with one rank still agrees (with itself) on a
  // regroup request, so replacements can join it.
  if (worldSize() == 1 && !elastic_) return local_->runAlone(in);
  // Synchronised statistics need samples in every rank's every micro-batch;
  // an epoch's last global batch smaller than that is skipped by all ranks alike.
  if (gradients_->syncsBatchStats() &&
      in.batch.global_size < worldSize() * local_->parts().job->train.accumulate) {
    if (!elastic_) return StepFigures{};
    return agreeOnStep(in, BatchFigures{}, false);
  }
  if (!elastic_) return local_->update(in, gradients_->compute(in));
  return agreeOnStep(in, gradients_->compute(in), true);
}

StepFigures MirroredStrategy::agreeOnStep(const StepInput& in, const BatchFigures& queued, bool update) {
  const BatchFigures mine = update ? local_->readFigures(queued) : queued;
  double figs[5] = {mine.loss_sum, static_cast<double>(mine.correct), static_cast<double>(mine.samples),
                    in.stop ? 1.0 : 0.0, in.regroup ? 1.0 : 0.0};
  group_->allReduceSum(figs, 5);
  StepFigures f = update ? local_->update(in, mine) : StepFigures{};
  f.host.loss_sum = figs[0];
  f.host.correct = static_cast<int64_t>(figs[1]);
  f.host.samples = static_cast<int64_t>(figs[2]);
  f.agreed = true;
  f.stop = figs[3] > 0 ? (in.stop ? in.stop : SIGTERM) : 0;
  f.regroup = figs[4] > 0;
  return f;
}

void MirroredStrategy::agreeOnBuffers(ParamStore& buffers) {
  averageBuffers(*group_, buffers, gradients_ && gradients_->syncsBatchStats());
}

}  // namespace dtrain
