#include "core/tensor/tensor.h"

#include <cstring>

#include "core/backend/device_memory.h"
#include "core/errors.h"

namespace dtrain {

Tensor Tensor::empty(const Shape& shape, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.device_ = device;
  size_t bytes = static_cast<size_t>(shape.numel()) * sizeof(float);
  t.storage_ = device.isCpu() ? allocateHost(bytes) : allocateDeviceMemory(device, bytes == 0 ? 4 : bytes);
  t.data_ = static_cast<float*>(t.storage_.get());
  return t;
}

Tensor Tensor::pinned(const Shape& shape) {
  Tensor t;
  t.shape_ = shape;
  t.storage_ = allocatePinnedHost(static_cast<size_t>(shape.numel()) * sizeof(float));
  t.data_ = static_cast<float*>(t.storage_.get());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, Device device) {
  Tensor t = empty(shape, device);
  t.zero();
  return t;
}

Tensor Tensor::view(float* data, const Shape& shape, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.device_ = device;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape.numel() != numel()) throw ShapeError("cannot reshape " + shape_.str() + " to " + shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::narrow(int64_t start, int64_t len) const {
  if (shape_.rank() == 0 || start < 0 || len < 0 || start + len > shape_[0])
    throw ShapeError("narrow(" + std::to_string(start) + ", " + std::to_string(len) + ") out of range for " +
                     shape_.str());
  Tensor t = *this;
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = data_ + start * row;
  t.shape_[0] = len;
  return t;
}

void Tensor::fill(float v) {
  if (!device_.isCpu()) {
    fillDeviceMemory(data_, numel(), v, device_);
    return;
  }
  float* p = data_;
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
}

void Tensor::copyFrom(const Tensor& src) {
  if (src.numel() != numel()) throw ShapeError("copy of " + src.shape_.str() + " into " + shape_.str());
  if (numel() == 0) return;
  const size_t bytes = static_cast<size_t>(numel()) * sizeof(float);
  if (device_.isCpu() && src.device_.isCpu())
    std::memcpy(data_, src.data_, bytes);
  else
    copyDeviceMemory(data_, device_, src.data_, src.device_, bytes);
}

void Tensor::add(const Tensor& src) {
  if (src.numel() != numel()) throw ShapeError("sum of " + src.shape_.str() + " into " + shape_.str());
  if (!(src.device_ == device_))
    throw Error("sum of a tensor on " + src.device_.str() + " into one on " + device_.str());
  if (!device_.isCpu()) {
    addDeviceMemory(data_, src.data_, numel(), device_);
    return;
  }
  float* dst = data_;
  const float* from = src.data_;
  for (int64_t i = 0, n = numel(); i < n; ++i) dst[i] += from[i];
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, device);
  t.copyFrom(*this);
  return t;
}

}  // namespace dtrain
