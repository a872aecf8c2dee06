// A 16-bit copy of the parameters that a GPU's optimizer update writes as it
// computes the new fp32 masters (the fused cast-and-update of a 16-bit
// precision: core/nn/model.h's halfParams()), in the flat layout.
#pragma once
#include "core/tensor/tensor.h"

namespace dtrain {

struct HalfCopy {
  void* data = nullptr;  // device memory of `dtype`, or null: no copy to write
  DType dtype = DType::BF16;
  // The copy of the range starting at element `begin`.
  HalfCopy at(int64_t begin) const {
    if (!data) return *this;
    return HalfCopy{static_cast<char*>(data) + static_cast<size_t>(begin) * elementSize(dtype), dtype};
  }
};

}  // namespace dtrain
