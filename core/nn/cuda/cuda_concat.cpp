#include "core/nn/cuda/cuda_concat.h"

#include "core/backend/cuda/cuda_check.h"

namespace dtrain {

namespace {

constexpr size_t kFloat = sizeof(float);

}  // namespace

void CudaConcat::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const size_t rows = static_cast<size_t>(out.dim(0) * outer_);
  for (size_t i = 0; i < in.size(); ++i) {
    if (rows == 0 || parts_[i] == 0) continue;
    // Input i's rows (pitch = its part) into their columns of the output rows.
    checkCuda(cudaMemcpy2DAsync(out.data() + offsets_[i], row_ * kFloat, in[i]->data(), parts_[i] * kFloat,
                                parts_[i] * kFloat, rows, cudaMemcpyDeviceToDevice, ctx_.stream()),
              "copy an input of the concat layer");
  }
}

void CudaConcat::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                          const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const size_t rows = static_cast<size_t>(dout.dim(0) * outer_);
  for (size_t i = 0; i < din.size(); ++i) {
    if (!din[i] || rows == 0 || parts_[i] == 0) continue;
    checkCuda(cudaMemcpy2DAsync(din[i]->data(), parts_[i] * kFloat, dout.data() + offsets_[i], row_ * kFloat,
                                parts_[i] * kFloat, rows, cudaMemcpyDeviceToDevice, ctx_.stream()),
              "copy a gradient of the concat layer");
  }
}

}  // namespace dtrain
