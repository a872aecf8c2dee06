// The forward passes of core/backend/batch_norm_ops.h (the backward ones are
// in batch_norm_grad_ops.cpp). Two layouts: planes (plane > 1: a loop per
// (sample, channel) over its contiguous plane, the channel's constants held
// in registers) and rows (plane == 1: a loop per sample over its contiguous
// channels, the constants loaded per lane). Both moments of a plane are
// summed in one pass (two passes, each one chain of additions waiting on the
// adder's latency, had made it compute-bound), on explicit 8-lane vectors;
// the element-wise loops are plain enough for the compiler to vectorise
// (written without reassociation: they need no -ffast-math).
// The activation is a template parameter, so no branch is left in a loop.
#include "core/backend/batch_norm_ops.h"

#include <algorithm>

#include "core/backend/cpu/batch_norm_lanes.h"

namespace dtrain::ops {

namespace {

using batch_norm_lanes::normalised;

// act(normalised(x) [+ r]) over one plane, 8 lanes at a time and the last,
// partial vector masked (MobileNetV2's 3x3 planes are mostly that tail): the
// same operations on each element as the scalar definitions.
template <FusedActivation A, bool kResidual>
void applyPlane(const float* v, const float* r, float* out, int64_t len, float m, float k, float b) {
  const simd::V8 mv = simd::broadcast(m), kv = simd::broadcast(k), bv = simd::broadcast(b);
  auto value = [&](simd::V8 x, simd::V8 res) {
    simd::V8 pre = normalised(x, mv, kv, bv);
    if constexpr (kResidual) pre = pre + res;
    return batch_norm_lanes::activate<A>(pre);
  };
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    simd::store(out + i, value(simd::load(v + i), kResidual ? simd::load(r + i) : simd::zero()));
  if (i < len) {
    const int64_t lanes = len - i;
    simd::storeN(out + i,
                 value(simd::loadN(v + i, lanes), kResidual ? simd::loadN(r + i, lanes) : simd::zero()),
                 lanes);
  }
}

template <FusedActivation A, bool kResidual>
void applyPlanes(const float* x, float* y, int64_t n, int64_t channels, int64_t plane, const float* mean,
                 const float* scale, const float* shift, const float* residual) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t offset = (s * channels + c) * plane;
      applyPlane<A, kResidual>(x + offset, kResidual ? residual + offset : nullptr, y + offset, plane,
                               mean[c], scale[c], shift[c]);
    }
}

template <FusedActivation A>
void applyRows(const float* x, float* y, int64_t n, int64_t channels, const float* __restrict mean,
               const float* __restrict scale, const float* __restrict shift) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    float* __restrict out = y + s * channels;
    for (int64_t c = 0; c < channels; ++c)
      out[c] = activate<A>(normalised(v[c], mean[c], scale[c], shift[c]));
  }
}

template <FusedActivation A>
void applyRowsResidual(const float* x, float* y, int64_t n, int64_t channels, const float* __restrict mean,
                       const float* __restrict scale, const float* __restrict shift, const float* residual) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    const float* __restrict r = residual + s * channels;
    float* __restrict out = y + s * channels;
    for (int64_t c = 0; c < channels; ++c)
      out[c] = activate<A>(normalised(v[c], mean[c], scale[c], shift[c]) + r[c]);
  }
}

// sum of (v - k) and of (v - k)^2 over one plane, in one read: per block of
// kSumBlock, eight lanes of each (two chains of additions in flight), then
// the lanes (pairwise) and the tail (in order) in float, the block in double.
void planeShiftedMoments(const float* v, int64_t len, float k, double& sum, double& squares) {
  const simd::V8 kv = simd::broadcast(k);
  for (int64_t start = 0; start < len; start += batch_norm_lanes::kSumBlock) {
    const int64_t end = std::min(len, start + batch_norm_lanes::kSumBlock);
    simd::V8 s = simd::zero(), q = simd::zero();
    int64_t i = start;
    for (; i + 8 <= end; i += 8) {
      const simd::V8 d = simd::load(v + i) - kv;
      s = s + d;
      q = simd::fmadd(d, d, q);
    }
    float block_sum = batch_norm_lanes::pairwiseSum(s), block_squares = batch_norm_lanes::pairwiseSum(q);
    for (; i < end; ++i) {
      const float d = v[i] - k;
      block_sum += d;
      block_squares = std::fma(d, d, block_squares);
    }
    sum += block_sum;
    squares += block_squares;
  }
}

// sum of (v - m)^2 over one plane: the moments pass's squares, shifted by
// the mean (a rare second round: its sum of deviations is not needed).
double planeSquaredDeviations(const float* v, int64_t len, float m) {
  double deviations = 0.0, squares = 0.0;
  planeShiftedMoments(v, len, m, deviations, squares);
  return squares;
}

}  // namespace

void channelShiftedMoments(const float* x, int64_t n, int64_t channels, int64_t plane, const float* shift,
                           double* sums, double* squares) {
  if (plane == 1) {
    for (int64_t s = 0; s < n; ++s) {
      const float* __restrict v = x + s * channels;
      for (int64_t c = 0; c < channels; ++c) {
        const double d = v[c] - shift[c];
        sums[c] += d;
        squares[c] += d * d;
      }
    }
    return;
  }
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c)
      planeShiftedMoments(x + (s * channels + c) * plane, plane, shift[c], sums[c], squares[c]);
}

void channelSquaredDeviations(const float* x, int64_t n, int64_t channels, int64_t plane, const float* mean,
                              double* sums) {
  if (plane == 1) {
    for (int64_t s = 0; s < n; ++s) {
      const float* __restrict v = x + s * channels;
      const float* __restrict m = mean;
      double* __restrict acc = sums;
      for (int64_t c = 0; c < channels; ++c) {
        const double d = v[c] - m[c];
        acc[c] += d * d;
      }
    }
    return;
  }
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c)
      sums[c] += planeSquaredDeviations(x + (s * channels + c) * plane, plane, mean[c]);
}

void batchNormApply(const float* x, float* y, int64_t n, int64_t channels, int64_t plane, const float* mean,
                    const float* scale, const float* shift, const float* residual, FusedActivation act) {
  withActivation(act, [&](auto a) {
    constexpr FusedActivation A = decltype(a)::value;
    if (residual && plane == 1)
      applyRowsResidual<A>(x, y, n, channels, mean, scale, shift, residual);
    else if (residual)
      applyPlanes<A, true>(x, y, n, channels, plane, mean, scale, shift, residual);
    else if (plane == 1)
      applyRows<A>(x, y, n, channels, mean, scale, shift);
    else
      applyPlanes<A, false>(x, y, n, channels, plane, mean, scale, shift, nullptr);
  });
}

void fusedActivationGrad(const float* y, const float* dy, float* g, int64_t count, FusedActivation act) {
  withActivation(act, [&](auto a) {
    constexpr FusedActivation A = decltype(a)::value;
    for (int64_t i = 0; i < count; ++i) g[i] = maskGrad<A>(A == FusedActivation::None ? 0.0f : y[i], dy[i]);
  });
}

}  // namespace dtrain::ops
