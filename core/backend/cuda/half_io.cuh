// Loads and stores of the element types a GPU's tensors hold (float, and in
// a 16-bit precision bf16 or fp16): kernels written once as templates on the
// element type read and write through these and compute in float. A store
// rounds to nearest, ties to even, as the CPU's reference path
// (core/backend/ops.h's roundTo16Bits) does, so both store the same values.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// Calls f(T{}) with T the element type of `dtype`: a host function's one
// switch from a tensor's DType to its kernel's instantiation.
template <typename F>
inline void withElementType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    case DType::F16: f(__half{}); return;
  }
}

}  // namespace dtrain::cuda
