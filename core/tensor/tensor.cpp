#include "core/tensor/tensor.h"

#include <cstring>
#include <vector>

#include "core/backend/device_memory.h"
#include "core/backend/ops.h"
#include "core/errors.h"

namespace dtrain {

namespace {

ops::HalfFormat formatOf(DType t) { return t == DType::F16 ? ops::HalfFormat::Fp16 : ops::HalfFormat::Bf16; }

}  // namespace

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
  }
  return "?";
}

void Tensor::notFloats() const {
  throw ShapeError(std::string("a ") + dtypeName(dtype_) + " tensor " + shape_.str() + " read as floats");
}

Tensor Tensor::empty(const Shape& shape, Device device, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.device_ = device;
  t.dtype_ = dtype;
  size_t bytes = t.bytes();
  t.storage_ = device.isCpu() ? allocateHost(bytes) : allocateDeviceMemory(device, bytes == 0 ? 4 : bytes);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::pinned(const Shape& shape) {
  Tensor t;
  t.shape_ = shape;
  t.storage_ = allocatePinnedHost(static_cast<size_t>(shape.numel()) * sizeof(float));
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::zeros(const Shape& shape, Device device, DType dtype) {
  Tensor t = empty(shape, device, dtype);
  t.zero();
  return t;
}

Tensor Tensor::zerosInHugePages(const Shape& shape, Device device) {
  if (!device.isCpu()) return zeros(shape, device);
  Tensor t;
  t.shape_ = shape;
  t.device_ = device;
  t.storage_ = allocateHostHugePages(t.bytes());  // zeroed
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::view(float* data, const Shape& shape, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.device_ = device;
  return t;
}

Tensor Tensor::view(void* data, const Shape& shape, Device device, DType dtype) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.device_ = device;
  t.dtype_ = dtype;
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
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(start * row) * elementSize(dtype_);
  t.shape_[0] = len;
  return t;
}

void Tensor::fill(float v) {
  if (dtype_ != DType::F32) {
    uint16_t bits = 0;
    ops::encode16Bits(formatOf(dtype_), &v, &bits, 1);
    uint16_t* p = static_cast<uint16_t*>(data_);
    if (!device_.isCpu()) {
      fillDeviceMemory16(p, numel(), bits, device_);
      return;
    }
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = bits;
    return;
  }
  float* p = data();
  if (!device_.isCpu()) {
    fillDeviceMemory(p, numel(), v, device_);
    return;
  }
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
}

void Tensor::copyFrom(const Tensor& src) {
  if (src.numel() != numel()) throw ShapeError("copy of " + src.shape_.str() + " into " + shape_.str());
  if (src.dtype_ != dtype_)
    throw ShapeError(std::string("copy of a ") + dtypeName(src.dtype_) + " tensor into a " +
                     dtypeName(dtype_) + " one");
  if (numel() == 0) return;
  const size_t bytes = this->bytes();
  if (device_.isCpu() && src.device_.isCpu())
    std::memcpy(data_, src.data_, bytes);
  else
    copyDeviceMemory(data_, device_, src.data_, src.device_, bytes);
}

void Tensor::add(const Tensor& src) {
  if (src.numel() != numel()) throw ShapeError("sum of " + src.shape_.str() + " into " + shape_.str());
  if (!(src.device_ == device_))
    throw Error("sum of a tensor on " + src.device_.str() + " into one on " + device_.str());
  if (src.dtype_ != dtype_)
    throw ShapeError(std::string("sum of a ") + dtypeName(src.dtype_) + " tensor into a " +
                     dtypeName(dtype_) + " one");
  if (dtype_ != DType::F32) {
    if (!device_.isCpu()) {
      addDeviceMemory16(data_, src.data_, dtype_, numel(), device_);
      return;
    }
    // Host 16-bit tensors (tests): summed in float, rounded back.
    const int64_t n = numel();
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ops::decode16Bits(formatOf(dtype_), static_cast<const uint16_t*>(data_), a.data(), n);
    ops::decode16Bits(formatOf(dtype_), static_cast<const uint16_t*>(src.data_), b.data(), n);
    for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] += b[static_cast<size_t>(i)];
    ops::encode16Bits(formatOf(dtype_), a.data(), static_cast<uint16_t*>(data_), n);
    return;
  }
  if (!device_.isCpu()) {
    addDeviceMemory(data(), src.data(), numel(), device_);
    return;
  }
  float* dst = data();
  const float* from = src.data();
  for (int64_t i = 0, n = numel(); i < n; ++i) dst[i] += from[i];
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, device, dtype_);
  t.copyFrom(*this);
  return t;
}

}  // namespace dtrain
