// Tensor = shape + dtype + device + shared storage.
// Ownership: storage is reference counted; copies of a Tensor alias the same
// memory. view() wraps memory owned elsewhere (e.g. the flat parameter buffer)
// without owning it. Not thread-safe for concurrent writes to one tensor.
//
// Device tensors (Device::Kind::Cuda) hold device memory: data() is a device
// pointer, for kernels only. fill, copyFrom and to() work on any device (see
// core/backend/device_memory.h for their ordering).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor/shape.h"

namespace dtrain {

// F32 everywhere; BF16 and F16 hold a GPU's activations in a 16-bit
// precision (core/nn/precision.h), as the formats' bits.
enum class DType : uint8_t { F32, BF16, F16 };
inline size_t elementSize(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtypeName(DType t);

struct Device {
  enum class Kind : uint8_t { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int index = 0;
  static Device cpu() { return Device{}; }
  static Device cuda(int index) { return Device{Kind::Cuda, index}; }
  bool isCpu() const { return kind == Kind::Cpu; }
  std::string str() const { return isCpu() ? "cpu" : "cuda:" + std::to_string(index); }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory, 64-byte aligned.
  static Tensor empty(const Shape& shape, Device device = Device::cpu(), DType dtype = DType::F32);
  static Tensor zeros(const Shape& shape, Device device = Device::cpu(), DType dtype = DType::F32);
  // Zeros in host memory the kernel backs with 2 MiB pages where it can
  // (allocateHostHugePages): a model's flat parameter and gradient buffers,
  // written whole every step, and in a sharded run handed back in parts and
  // faulted in again (512 times fewer faults). Other devices: zeros().
  static Tensor zerosInHugePages(const Shape& shape, Device device = Device::cpu());
  // A non-owning view of `count` floats at `data`; the caller keeps them alive.
  static Tensor view(float* data, const Shape& shape, Device device = Device::cpu());
  // The same of elements of `dtype` at `data`.
  static Tensor view(void* data, const Shape& shape, Device device, DType dtype);
  // Host memory the GPU copies from asynchronously (page-locked when a GPU is
  // there; ordinary memory otherwise).
  static Tensor pinned(const Shape& shape);

  bool defined() const { return data_ != nullptr || shape_.numel() == 0; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return static_cast<size_t>(numel()) * elementSize(dtype_); }
  Device device() const { return device_; }

  // The floats of an F32 tensor (throws ShapeError for another dtype: a
  // 16-bit tensor is read through raw() by code that knows its format).
  float* data() {
    if (dtype_ != DType::F32) notFloats();
    return static_cast<float*>(data_);
  }
  const float* data() const {
    if (dtype_ != DType::F32) notFloats();
    return static_cast<const float*>(data_);
  }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  // Same memory, another shape of the same element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [start, start+len) of the leading dimension, sharing memory.
  Tensor narrow(int64_t start, int64_t len) const;

  // Every element = v (rounded to a 16-bit dtype's format).
  void fill(float v);
  void zero() { fill(0.0f); }
  // Element counts and dtypes must match; the devices may differ.
  void copyFrom(const Tensor& src);
  // this += src, element-wise, on this tensor's device (src on the same one,
  // of the same dtype; a 16-bit sum is rounded back to its format).
  void add(const Tensor& src);
  // A copy on `device` (this tensor itself when it is there already).
  Tensor to(Device device) const;

 private:
  [[noreturn]] void notFloats() const;

  std::shared_ptr<void> storage_;  // null for views
  void* data_ = nullptr;
  Shape shape_;
  Device device_;
  DType dtype_ = DType::F32;
};

}  // namespace dtrain
