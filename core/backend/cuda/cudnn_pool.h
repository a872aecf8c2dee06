// Max and average pooling through cuDNN, with the CPU's meaning
// (core/backend/ops.h):
//   Max: padded positions never win: cuDNN leaves them out of the window
//     (the layer keeps padding at most half the window, so every window holds
//     an input element). CUDNN_POOLING_MAX_DETERMINISTIC, so backward gives
//     the same bits every run. On an exact tie cuDNN routes a window's
//     gradient to one of its maxima, which need not be the first one the CPU
//     picks: the sums differ only where inputs are exactly equal.
//   AverageIncludePad: padding counts as zeros, divisor always kh*kw
//     (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING).
// NaN propagates through max pooling, as on the CPU.
//
// Data of any tensor dtype: f32, or bf16/fp16 in a 16-bit precision (tensor
// descriptors of that type, alpha and beta still floats, as cuDNN takes them
// for half and bfloat16 data). cuDNN documents no accumulation type for 16-bit
// pooling; the windows here are small, and global average pooling over whole
// planes does not come here in 16 bits (global_avg_pool_kernels.h).
//
// Ownership and threading: device pointers are the caller's. One instance is
// used by one thread (its layer's); calls queue work on the handle's stream
// and do not synchronise.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/backend/cuda/cudnn_descriptors.h"
#include "core/backend/ops.h"

namespace dtrain {

class CudnnPool {
 public:
  enum class Mode { Max, AverageIncludePad };

  // Throws ShapeError for a geometry without output or with padding over half the window.
  CudnnPool(const ops::Window2d& geom, Mode mode);

  // A batch of 0 does nothing; a negative one throws ShapeError.
  // y [n,C,Ho,Wo] from x [n,C,H,W], overwriting y.
  void forward(cudnnHandle_t handle, const float* x, float* y, int64_t n);
  // dx [n,C,H,W] (overwritten) from y, dy and x of the same batch's forward.
  void backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy, float* dx, int64_t n);
  // The same on data of `dtype` (every pointer to it).
  void forward(cudnnHandle_t handle, const void* x, void* y, DType dtype, int64_t n);
  void backward(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx, DType dtype,
                int64_t n);

 private:
  using Tensors = std::pair<CudnnTensorDescriptor, CudnnTensorDescriptor>;  // input, output

  // The input and output descriptors for a batch of n of `dtype`, made on first use.
  const Tensors& tensorsFor(int64_t n, DType dtype);
  // Throws DeviceError naming the pooling, the batch and (when not f32) the dtype.
  void check(cudnnStatus_t status, const char* what, int64_t n, DType dtype = DType::F32) const;

  ops::Window2d geom_;
  Mode mode_;
  std::string describe_;  // "max pool 3x3, stride 2x2, padding 1x1 over 5x11x11", for messages
  CudnnPoolingDescriptor pool_;
  std::map<std::pair<int64_t, DType>, Tensors> tensors_;  // by batch size and dtype
};

}  // namespace dtrain
