#include "core/tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/errors.h"

namespace dtrain {

namespace {
void requireCpu(Device d) {
  if (!d.isCpu())
    throw Error("device " + d.str() + " is not available in this build (CPU only)");
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, Device device) {
  requireCpu(device);
  Tensor t;
  t.shape_ = shape;
  t.device_ = device;
  size_t bytes = static_cast<size_t>(shape.numel()) * sizeof(float);
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  t.storage_ = std::shared_ptr<void>(p, std::free);
  t.data_ = static_cast<float*>(p);
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
  if (shape.numel() != numel())
    throw ShapeError("cannot reshape " + shape_.str() + " to " + shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::narrow(int64_t start, int64_t len) const {
  if (shape_.rank() == 0 || start < 0 || len < 0 || start + len > shape_[0])
    throw ShapeError("narrow(" + std::to_string(start) + ", " + std::to_string(len) +
                     ") out of range for " + shape_.str());
  Tensor t = *this;
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = data_ + start * row;
  t.shape_[0] = len;
  return t;
}

void Tensor::fill(float v) {
  float* p = data_;
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
}

void Tensor::copyFrom(const Tensor& src) {
  if (src.numel() != numel())
    throw ShapeError("copy of " + src.shape_.str() + " into " + shape_.str());
  if (numel()) std::memcpy(data_, src.data_, static_cast<size_t>(numel()) * sizeof(float));
}

}  // namespace dtrain
