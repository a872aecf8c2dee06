// StepScalarsBuffer on a GPU (core/backend/step_scalars.h): one StepScalars
// in device memory, and pinned slots the host writes in turn, each copied to
// the device on the compute stream with an event behind the copy, so a slot
// is rewritten only once its last copy has run.
#pragma once
#include <memory>
#include <vector>

#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/step_scalars.h"

namespace dtrain {

class CudaStepScalarsBuffer final : public StepScalarsBuffer {
 public:
  explicit CudaStepScalarsBuffer(CudaContext& ctx);
  const StepScalars* onDevice() const override { return static_cast<const StepScalars*>(device_.get()); }
  void upload(const StepScalars& scalars) override;

 private:
  // More slots than steps the host runs ahead of the device (it settles
  // each step's figures one step later), so a slot's copy has always run.
  static constexpr int kSlots = 8;

  CudaContext& ctx_;
  std::shared_ptr<void> device_;   // one StepScalars
  std::shared_ptr<void> pinned_;   // kSlots StepScalars
  std::vector<CudaEvent> copied_;  // per slot, behind its last copy
  int next_ = 0;
};

}  // namespace dtrain
