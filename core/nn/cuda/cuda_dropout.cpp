#include "core/nn/cuda/cuda_dropout.h"

#include "core/backend/cuda/dropout_kernels.h"

namespace dtrain {

void CudaDropout::maskForward(const float* x, float* y, int64_t rows, const ops::DropoutKey& key) {
  cuda::dropoutForward(x, y, rows, elements_, rate_, key, ctx_.stream());
}

void CudaDropout::maskBackward(const float* dy, float* dx, int64_t rows, const ops::DropoutKey& key) {
  cuda::dropoutBackward(dy, dx, rows, elements_, rate_, key, ctx_.stream());
}

}  // namespace dtrain
