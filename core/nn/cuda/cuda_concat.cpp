#include "core/nn/cuda/cuda_concat.h"

#include "core/backend/cuda/cuda_check.h"

namespace dtrain {

namespace {

// Byte addresses: the layer's extents count elements, whose size is the
// activations' dtype's (4 bytes, or 2 in a 16-bit precision).
char* bytesOf(Tensor& t) { return static_cast<char*>(t.raw()); }
const char* bytesOf(const Tensor& t) { return static_cast<const char*>(t.raw()); }

}  // namespace

void CudaConcat::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const size_t rows = static_cast<size_t>(out.dim(0) * outer_);
  const size_t e = elementSize(out.dtype());
  for (size_t i = 0; i < in.size(); ++i) {
    if (rows == 0 || parts_[i] == 0) continue;
    // Input i's rows (pitch = its part) into their columns of the output rows.
    checkCuda(cudaMemcpy2DAsync(bytesOf(out) + offsets_[i] * e, row_ * e, bytesOf(*in[i]), parts_[i] * e,
                                parts_[i] * e, rows, cudaMemcpyDeviceToDevice, ctx_.stream()),
              "copy an input of the concat layer");
  }
}

void CudaConcat::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                          const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const size_t rows = static_cast<size_t>(dout.dim(0) * outer_);
  const size_t e = elementSize(dout.dtype());
  for (size_t i = 0; i < din.size(); ++i) {
    if (!din[i] || rows == 0 || parts_[i] == 0) continue;
    checkCuda(cudaMemcpy2DAsync(bytesOf(*din[i]), parts_[i] * e, bytesOf(dout) + offsets_[i] * e, row_ * e,
                                parts_[i] * e, rows, cudaMemcpyDeviceToDevice, ctx_.stream()),
              "copy a gradient of the concat layer");
  }
}

}  // namespace dtrain
