#include "core/backend/cuda/cudnn_descriptors.h"

#include <limits>
#include <string>

#include "core/errors.h"

namespace dtrain {

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

std::string shapeText(int64_t a, int64_t b, int64_t c, int64_t d) {
  return "[" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "," +
         std::to_string(d) + "]";
}

// cuDNN takes every extent, and indexes every element, with an int.
void checkFitsInt(int64_t a, int64_t b, int64_t c, int64_t d, const char* what) {
  const bool positive = a > 0 && b > 0 && c > 0 && d > 0;
  if (positive && a <= kIntMax / b && a * b <= kIntMax / c && a * b * c <= kIntMax / d) return;
  throw DeviceError(
      std::string("cuDNN: ") + what + " " + shapeText(a, b, c, d) +
      (positive ? " has more than 2^31-1 elements; use a smaller batch" : " has an extent below 1"));
}

}  // namespace

cudnnDataType_t cudnnDataTypeOf(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F16: return CUDNN_DATA_HALF;
  }
  return CUDNN_DATA_FLOAT;
}

CudnnTensorDescriptor::CudnnTensorDescriptor(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type,
                                             cudnnTensorFormat_t format) {
  checkFitsInt(n, c, h, w, "tensor");
  checkCudnn(cudnnSetTensor4dDescriptor(get(), format, type, static_cast<int>(n),
                                        static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
             ("describe tensor " + shapeText(n, c, h, w)).c_str());
}

CudnnFilterDescriptor::CudnnFilterDescriptor(int64_t filters, int64_t channels, int64_t kernel_h,
                                             int64_t kernel_w, cudnnDataType_t type, cudnnTensorFormat_t format) {
  checkFitsInt(filters, channels, kernel_h, kernel_w, "filter");
  checkCudnn(cudnnSetFilter4dDescriptor(get(), type, format, static_cast<int>(filters),
                                        static_cast<int>(channels), static_cast<int>(kernel_h),
                                        static_cast<int>(kernel_w)),
             ("describe filter " + shapeText(filters, channels, kernel_h, kernel_w)).c_str());
}

CudnnConvolutionDescriptor::CudnnConvolutionDescriptor(int64_t pad_h, int64_t pad_w, int64_t stride_h,
                                                       int64_t stride_w, cudnnMathType_t math,
                                                       int64_t groups) {
  if (pad_h < 0 || pad_w < 0 || pad_h > kIntMax || pad_w > kIntMax || stride_h < 1 || stride_w < 1 ||
      stride_h > kIntMax || stride_w > kIntMax)
    throw DeviceError("cuDNN: convolution padding " + std::to_string(pad_h) + "x" + std::to_string(pad_w) +
                      " and stride " + std::to_string(stride_h) + "x" + std::to_string(stride_w) +
                      " out of range (padding >= 0, stride >= 1)");
  checkCudnn(cudnnSetConvolution2dDescriptor(get(), static_cast<int>(pad_h), static_cast<int>(pad_w),
                                             static_cast<int>(stride_h), static_cast<int>(stride_w), 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             "describe a convolution");
  if (groups < 1 || groups > kIntMax)
    throw DeviceError("cuDNN: convolution groups " + std::to_string(groups) + " out of range (>= 1)");
  checkCudnn(cudnnSetConvolutionGroupCount(get(), static_cast<int>(groups)),
             ("set a convolution's group count to " + std::to_string(groups)).c_str());
  setMathType(math);
}

void CudnnConvolutionDescriptor::setMathType(cudnnMathType_t math) {
  checkCudnn(cudnnSetConvolutionMathType(get(), math), "set a convolution's math type");
}

CudnnPoolingDescriptor::CudnnPoolingDescriptor(cudnnPoolingMode_t mode, int64_t kernel_h, int64_t kernel_w,
                                               int64_t pad_h, int64_t pad_w, int64_t stride_h,
                                               int64_t stride_w) {
  checkFitsInt(kernel_h, kernel_w, stride_h, stride_w, "pooling window and stride");
  if (pad_h < 0 || pad_w < 0 || pad_h >= kernel_h || pad_w >= kernel_w)
    throw DeviceError("cuDNN: pooling padding " + std::to_string(pad_h) + "x" + std::to_string(pad_w) +
                      " must be >= 0 and smaller than the window " + std::to_string(kernel_h) + "x" +
                      std::to_string(kernel_w));
  checkCudnn(cudnnSetPooling2dDescriptor(get(), mode, CUDNN_PROPAGATE_NAN, static_cast<int>(kernel_h),
                                         static_cast<int>(kernel_w), static_cast<int>(pad_h),
                                         static_cast<int>(pad_w), static_cast<int>(stride_h),
                                         static_cast<int>(stride_w)),
             "describe a pooling window");
}

}  // namespace dtrain
