// dropout on a GPU: the CPU layer (core/nn/layers/dropout.h) with the same
// counter-based mask, so a sample is dropped identically on either device;
// only the masked passes run here, the identity cases are the CPU layer's.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/dropout.h"

namespace dtrain {

class CudaDropout : public Dropout {
 public:
  CudaDropout(const Dropout& cpu, CudaContext& ctx) : Dropout(cpu.name(), cpu.rate()), ctx_(ctx) {}

 protected:
  void maskForward(const float* x, float* y, int64_t rows, const ops::DropoutKey& key) override;
  void maskBackward(const float* dy, float* dx, int64_t rows, const ops::DropoutKey& key) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
