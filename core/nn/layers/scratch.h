// Growable scratch memory owned by one layer instance (so one thread at a
// time): grown on first use to the largest size asked, never shrunk, so the
// steady state allocates nothing. 64-byte aligned on the CPU; the GPU layers
// keep theirs in device memory.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor/tensor.h"

namespace dtrain {

class Scratch {
 public:
  // At least `count` floats on `device`; the contents are unspecified.
  float* floats(int64_t count, Device device = Device::cpu()) {
    if (count > capacity_ || !(buffer_.device() == device)) {
      buffer_ = Tensor::empty(Shape{count}, device);
      capacity_ = count;
    }
    return buffer_.data();
  }
  // At least `count` elements of `dtype` (a GPU layer's 16-bit scratch).
  void* elements(int64_t count, DType dtype, Device device) {
    const int64_t floats = (count * static_cast<int64_t>(elementSize(dtype)) + 3) / 4;
    return floats == 0 ? nullptr : static_cast<void*>(this->floats(floats, device));
  }

 private:
  Tensor buffer_;
  int64_t capacity_ = 0;
};

// The same for int32 values (max-pooling indices).
class IndexScratch {
 public:
  int32_t* ints(int64_t count) {
    if (count > static_cast<int64_t>(buffer_.size())) buffer_.resize(static_cast<size_t>(count));
    return buffer_.data();
  }

 private:
  std::vector<int32_t> buffer_;
};

}  // namespace dtrain
