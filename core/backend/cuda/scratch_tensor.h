// Scratch memory of a GPU layer: a device tensor grown to the largest size
// asked, never shrunk (the CPU layers' Scratch, on a device).
#pragma once
#include "core/tensor/tensor.h"

namespace dtrain {

// At least `count` floats of `buffer` on `device`; the contents are unspecified.
inline float* scratchFloats(Tensor& buffer, int64_t count, Device device) {
  if (!buffer.defined() || buffer.numel() < count || !(buffer.device() == device))
    buffer = Tensor::empty(Shape{count}, device);
  return buffer.data();
}

}  // namespace dtrain
