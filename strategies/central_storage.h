// [strategy] type = "central_storage" (TensorFlow's CentralStorageStrategy):
// one host, `workers` processes launched as mirrored's are; the variables'
// update happens in one place. Every worker computes the gradients of its
// slice of the global batch on its own device; the gradients are summed onto
// rank 0, the holder of the variables, which alone clips them
// ([train] grad_clip_norm) and runs the optimizer (the other workers' optimizer
// state is released at attach: it exists only on rank 0); then every worker
// receives rank 0's parameters. Synchronous: the same training as mirrored's
// within float rounding.
//
// The sum travels during backward, bucket by bucket, as mirrored's does
// (OverlappedReducer), as a reduce-scatter whose only segment is rank 0's;
// with [strategy] sync_batchnorm the statistics use the collectives during the
// passes instead and the gradients are summed after backward. Batch norm's
// running statistics are treated as mirrored treats them
// (batch_norm_across_workers).
//
// Each worker still holds a copy of the parameters (its replicas compute from
// it); the copy is refreshed by a broadcast from rank 0 after every update.
#pragma once
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/train/local_step.h"
#include "core/train/strategy.h"
#include "strategies/gradient_sum.h"
#include "strategies/group_strategy.h"

namespace dtrain {

class CentralStorageStrategy : public GroupStrategy {
 public:
  explicit CentralStorageStrategy(std::shared_ptr<ProcessGroup> group);
  ~CentralStorageStrategy() override;
  std::string name() const override { return "central_storage"; }

  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override;
  StepFigures step(const StepInput& in) override;
  void agreeOnBuffers(ParamStore& buffers) override;

 private:
  // Sums grads[0, n) over the workers onto rank 0 (the others' are left
  // unspecified).
  void sumOntoHolder(float* grads, int64_t n);

  std::unique_ptr<LocalStep> local_;
  std::unique_ptr<GradientSum> gradients_;
};

}  // namespace dtrain
