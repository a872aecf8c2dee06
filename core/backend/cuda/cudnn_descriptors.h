// Owners of the cuDNN descriptors the convolution and pooling layers use:
// each is created and filled on construction and destroyed with the object.
// They describe fp32 data in row-major NCHW (filters [F,C,kh,kw]), packed,
// unless given another data type (cudnnDataTypeOf: a 16-bit precision's
// tensors; their convolutions still sum in fp32).
//
// cuDNN 9 marks the filter, convolution and pooling descriptors deprecated in
// favour of its graph API; they are still the way to run these operations
// through the classic calls (cudnnConvolutionForward, cudnnPoolingForward).
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <utility>

#include "core/backend/cuda/cudnn_handle.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// CUDNN_DATA_FLOAT, _BFLOAT16 or _HALF.
cudnnDataType_t cudnnDataTypeOf(DType dtype);

// Ownership of one descriptor handle; movable, not copyable.
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { checkCudnn(Create(&handle_), "create a descriptor"); }
  ~CudnnDescriptor() {
    if (handle_) Destroy(handle_);
  }
  CudnnDescriptor(CudnnDescriptor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept {
    if (this != &other) {
      if (handle_) Destroy(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

// A packed fp32 NCHW tensor [n,c,h,w]. cuDNN indexes with int, so the element
// count must stay below 2^31 (DeviceError otherwise, naming the shape).
class CudnnTensorDescriptor : public CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                                     cudnnDestroyTensorDescriptor> {
 public:
  // `format` NHWC: the same extents, the channels innermost (channels-last).
  CudnnTensorDescriptor(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type = CUDNN_DATA_FLOAT,
                        cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
};

// Convolution weights [filters, channels, kh, kw], fp32 (channels per group
// for a grouped convolution).
class CudnnFilterDescriptor : public CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                                     cudnnDestroyFilterDescriptor> {
 public:
  // `format` NHWC: weights [filters, kh, kw, channels].
  CudnnFilterDescriptor(int64_t filters, int64_t channels, int64_t kernel_h, int64_t kernel_w,
                        cudnnDataType_t type = CUDNN_DATA_FLOAT, cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
};

// A 2-D cross-correlation (the layer's meaning of convolution: the kernel is
// not flipped), no dilation, fp32 accumulation; `groups` > 1 splits the
// channels and filters into that many independent convolutions.
class CudnnConvolutionDescriptor
    : public CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                             cudnnDestroyConvolutionDescriptor> {
 public:
  CudnnConvolutionDescriptor(int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w,
                             cudnnMathType_t math, int64_t groups = 1);
  // The math type travels with the descriptor, and an algorithm is chosen
  // together with one, so each call sets the math type its algorithm was chosen with.
  void setMathType(cudnnMathType_t math);
};

// A 2-D pooling window; NaN propagates through max pooling (as on the CPU).
class CudnnPoolingDescriptor : public CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                                      cudnnDestroyPoolingDescriptor> {
 public:
  CudnnPoolingDescriptor(cudnnPoolingMode_t mode, int64_t kernel_h, int64_t kernel_w, int64_t pad_h,
                         int64_t pad_w, int64_t stride_h, int64_t stride_w);
};

}  // namespace dtrain
