// Synchronous data parallelism over processes: mirrored (one host, one
// process per device or CPU slot) and multi_worker_mirrored (several hosts)
// are the same engine; they differ only in how the processes were launched.
// Every rank starts from rank 0's weights, computes gradients on its slice of
// the global batch (already scaled by 1/global batch), and the gradients are
// summed across ranks, so every rank takes the identical optimizer step.
//
// The sum runs while backward goes on: gradient buckets (gradient_buckets.h)
// are all-reduced on a communication thread as soon as every replica has
// finished their layers (overlapped_reducer.h). With [strategy]
// sync_batchnorm the ranks' collectives carry the batch statistics during
// the passes instead, so the gradients are summed after backward; an epoch's
// last global batch smaller than the rank count is then skipped by every rank.
//
// In an elastic run ([cluster] elastic) a step's figures, stop and regroup
// requests are summed before the update, so a step is whole on a rank or
// not begun: every collective that a lost peer can break comes before the
// rank changes its parameters.
#pragma once
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/train/local_step.h"
#include "core/train/strategy.h"
#include "strategies/gradient_sum.h"
#include "strategies/group_strategy.h"

namespace dtrain {

class MirroredStrategy : public GroupStrategy {
 public:
  MirroredStrategy(std::string name, std::shared_ptr<ProcessGroup> group, bool elastic = false);
  ~MirroredStrategy() override;
  std::string name() const override { return name_; }

  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override;
  StepFigures step(const StepInput& in) override;
  // The ranks' running statistics averaged, as tf.distribute reads
  // per-replica batch-norm moments; synchronised ones agree already.
  void agreeOnBuffers(ParamStore& buffers) override;

 private:
  // An elastic run's step from its gradients (summed already; `queued`: the
  // figures computeGradients returned): the figures (a GPU's read from the
  // device first), stop and regroup requests summed over the ranks, then the update.
  StepFigures agreeOnStep(const StepInput& in, const BatchFigures& queued, bool update);
  // All-reduces the gradient range [begin, end) of replica 0's buffer.
  void reduceGradients(float* grads, int64_t n);

  std::string name_;
  bool elastic_ = false;
  std::unique_ptr<LocalStep> local_;
  std::unique_ptr<GradientSum> gradients_;
};

}  // namespace dtrain
