// One process on one device (its compute threads combined inside
// ReplicaSet): nothing to combine across workers, so every collective is the
// identity and the whole step may be recorded as a CUDA graph.
#pragma once
#include <memory>

#include "core/train/local_step.h"
#include "core/train/strategy.h"

namespace dtrain {

class OneDeviceStrategy : public Strategy {
 public:
  std::string name() const override { return "one_device"; }
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  void broadcastParameters(float*, int64_t) override {}
  void broadcastFromChief(void*, int64_t) override {}
  void reduceFigures(double*, int64_t) override {}

  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override { return local_ ? local_->describe() : ""; }
  StepFigures step(const StepInput& in) override;
  void agreeOnBuffers(ParamStore&) override {}

 private:
  std::unique_ptr<LocalStep> local_;
};

}  // namespace dtrain
