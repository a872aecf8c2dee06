// What the batch_norm passes' two files share (forward: batch_norm_ops.cpp,
// backward: batch_norm_grad_ops.cpp): the normalised value, computed by one
// definition so the backward mask recomputed from x is the forward's bits;
// the activation and its mask on vectors, matching fused_activation.h lane
// for lane; the block size of the channel sums and their lanes' order.
// Internal to core/backend/cpu.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/backend/cpu/vec8.h"
#include "core/backend/fused_activation.h"

namespace dtrain::ops::batch_norm_lanes {

// Elements a block of lanes sums in float before its sum moves to double: 128
// terms per lane of one 8-lane vector (the forward moments), 64 per lane of
// two (the backward sums).
constexpr int64_t kSumBlock = 1024;

// The value before the activation: (x - mean) * scale + shift, one rounding
// for the product and the sum.
inline float normalised(float x, float mean, float scale, float shift) {
  return std::fma(x - mean, scale, shift);
}
inline simd::V8 normalised(simd::V8 x, simd::V8 mean, simd::V8 scale, simd::V8 shift) {
  return simd::fmadd(x - mean, scale, shift);
}

// activate<A> on 8 lanes: max(v, 0), then min(., 6) for relu6, a NaN passing.
template <FusedActivation A>
inline simd::V8 activate(simd::V8 v) {
  if constexpr (A == FusedActivation::None) return v;
  const simd::V8 r = simd::max0(v);
  if constexpr (A == FusedActivation::Relu6) return simd::atMost(r, simd::broadcast(6.0f));
  return r;
}

// maskGrad<A> on 8 lanes: g where the activation passed a gradient, judged at
// its output or at its input (the same lanes: relu's output is > 0 exactly
// where its input is, relu6's in (0, 6) exactly where its input is).
template <FusedActivation A>
inline simd::V8 maskGrad(simd::V8 at, simd::V8 g) {
  if constexpr (A == FusedActivation::None) return g;
  if constexpr (A == FusedActivation::Relu6) g = simd::whereBelow(at, simd::broadcast(6.0f), g);
  return simd::wherePositive(at, g);
}

// ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)).
inline float pairwiseSum(simd::V8 a) {
  float lanes[8];
  simd::store(lanes, a);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace dtrain::ops::batch_norm_lanes
