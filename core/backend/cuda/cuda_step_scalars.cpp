#include "core/backend/cuda/cuda_step_scalars.h"

#include <cstring>

#include "core/backend/cuda/cuda_check.h"
#include "core/errors.h"

namespace dtrain {

CudaStepScalarsBuffer::CudaStepScalarsBuffer(CudaContext& ctx)
    : ctx_(ctx), copied_(static_cast<size_t>(kSlots)) {
  device_ = ctx_.allocate(sizeof(StepScalars));
  pinned_ = cudaPinnedHost(sizeof(StepScalars) * kSlots);
  if (!pinned_) throw DeviceError("CUDA: could not allocate pinned host memory for the step's scalars");
  const StepScalars zero;
  ctx_.copy(device_.get(), &zero, sizeof zero, false);
}

void CudaStepScalarsBuffer::upload(const StepScalars& scalars) {
  const int slot = next_;
  next_ = (next_ + 1) % kSlots;
  const CudaEvent& copied = copied_[static_cast<size_t>(slot)];
  if (!copied.done()) copied.waitAhead();  // the device is kSlots steps behind, with them queued
  StepScalars* host = static_cast<StepScalars*>(pinned_.get()) + slot;
  std::memcpy(host, &scalars, sizeof scalars);
  checkCuda(cudaMemcpyAsync(device_.get(), host, sizeof scalars, cudaMemcpyHostToDevice, ctx_.stream()),
            "copy the step's scalars to the GPU");
  copied_[static_cast<size_t>(slot)].record(ctx_.stream());
}

}  // namespace dtrain
