#include "strategies/one_device.h"

#include "core/errors.h"

namespace dtrain {

void OneDeviceStrategy::attach(const TrainingParts& parts) {
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/true);
}

StepFigures OneDeviceStrategy::step(const StepInput& in) {
  if (!local_) throw Error("one_device: step before attach");
  return local_->runAlone(in);
}

}  // namespace dtrain
