// The backward passes of core/backend/batch_norm_ops.h: the per-channel
// gradient sums, then the input gradient. Along planes both run on 8-lane
// vectors (the compiler leaves masked sums scalar), with the activation's
// mask read from the output or recomputed from x (a compile-time choice, as
// is the activation), so each pass reads x and dy and, only after a fused
// residual, y. Along rows (plane == 1) the loops are plain, each value added
// in double. The sums pass also writes the masked gradient where a fused
// residual needs it; the input gradient then reads that instead of y and dy.
#include <algorithm>

#include "core/backend/batch_norm_ops.h"
#include "core/backend/cpu/batch_norm_lanes.h"

namespace dtrain::ops {

namespace {

using simd::V8;

// Where a plane's mask comes from: the output y, or x through the forward's
// normalisation (mean, scale and shift of the channel).
struct PlaneSource {
  const float* x;
  const float* y;
  const float* dy;
  V8 mean, scale, shift;
};

// The 8 floats from p, or with kPartial its first `lanes` (the others 0,
// and neither read nor written): the whole steps and a plane's last step
// share one body.
template <bool kPartial>
inline V8 loadLanes(const float* p, int64_t lanes) {
  if constexpr (kPartial) return simd::loadN(p, lanes);
  return simd::load(p);
}
template <bool kPartial>
inline void storeLanes(float* p, V8 v, int64_t lanes) {
  if constexpr (kPartial)
    simd::storeN(p, v, lanes);
  else
    simd::store(p, v);
}

// g = dy masked by A over the lanes from i; x is loaded by the caller.
template <FusedActivation A, bool kFromOutput, bool kPartial>
inline V8 maskedGrad(const PlaneSource& p, V8 x, int64_t i, int64_t lanes) {
  const V8 dy = loadLanes<kPartial>(p.dy + i, lanes);
  if constexpr (A == FusedActivation::None) return dy;
  const V8 at = kFromOutput ? loadLanes<kPartial>(p.y + i, lanes)
                            : batch_norm_lanes::normalised(x, p.mean, p.scale, p.shift);
  return batch_norm_lanes::maskGrad<A>(at, dy);
}

// Adds 16 elements' (or, from `lanes` < 16, fewer) g and g * (x - mean) to the
// accumulators, writing g to `masked` if asked. Lanes past the end load dy as
// 0, so they add 0.
template <FusedActivation A, bool kFromOutput, bool kWriteMasked, bool kPartial>
inline void addGradTerms(const PlaneSource& p, int64_t i, int64_t lanes, float* masked, V8& g0, V8& g1,
                         V8& d0, V8& d1) {
  const V8 x0 = loadLanes<kPartial>(p.x + i, lanes), x1 = loadLanes<kPartial>(p.x + i + 8, lanes - 8);
  const V8 m0 = maskedGrad<A, kFromOutput, kPartial>(p, x0, i, lanes);
  const V8 m1 = maskedGrad<A, kFromOutput, kPartial>(p, x1, i + 8, lanes - 8);
  if constexpr (kWriteMasked) {
    storeLanes<kPartial>(masked + i, m0, lanes);
    storeLanes<kPartial>(masked + i + 8, m1, lanes - 8);
  }
  g0 = g0 + m0;
  g1 = g1 + m1;
  d0 = simd::fmadd(m0, x0 - p.mean, d0);
  d1 = simd::fmadd(m1, x1 - p.mean, d1);
}

// dx = a * g + b * (x - mean) + c over the lanes from i, as fma(a, g, b * (x -
// mean)) + c.
template <FusedActivation A, bool kFromOutput, bool kPartial>
inline void inputGradLanes(const PlaneSource& p, int64_t i, int64_t lanes, V8 a, V8 b, V8 c, float* dx) {
  const V8 x = loadLanes<kPartial>(p.x + i, lanes);
  const V8 g = maskedGrad<A, kFromOutput, kPartial>(p, x, i, lanes);
  storeLanes<kPartial>(dx + i, simd::fmadd(a, g, b * (x - p.mean)) + c, lanes);
}

// One plane's sum of g and of g * (x - mean), writing g to `masked` if asked:
// per block of kSumBlock, sixteen lanes of each (the block's last, partial
// step masked), then the lanes pairwise in float, the block in double.
// MobileNetV2's 6x6 and 3x3 planes are mostly such tails.
template <FusedActivation A, bool kFromOutput, bool kWriteMasked>
void planeGradSums(const PlaneSource& p, int64_t len, double& sum_g, double& sum_g_dev, float* masked) {
  for (int64_t start = 0; start < len; start += batch_norm_lanes::kSumBlock) {
    const int64_t end = std::min(len, start + batch_norm_lanes::kSumBlock);
    V8 g0 = simd::zero(), g1 = simd::zero(), d0 = simd::zero(), d1 = simd::zero();
    int64_t i = start;
    for (; i + 16 <= end; i += 16)
      addGradTerms<A, kFromOutput, kWriteMasked, false>(p, i, 16, masked, g0, g1, d0, d1);
    if (i < end) addGradTerms<A, kFromOutput, kWriteMasked, true>(p, i, end - i, masked, g0, g1, d0, d1);
    sum_g += batch_norm_lanes::pairwiseSum(g0 + g1);
    sum_g_dev += batch_norm_lanes::pairwiseSum(d0 + d1);
  }
}

// dx over one plane; the last, partial vector masked.
template <FusedActivation A, bool kFromOutput>
void planeInputGrad(const PlaneSource& p, int64_t len, V8 a, V8 b, V8 c, float* dx) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) inputGradLanes<A, kFromOutput, false>(p, i, 8, a, b, c, dx);
  if (i < len) inputGradLanes<A, kFromOutput, true>(p, i, len - i, a, b, c, dx);
}

template <class PerPlane>
void forEachPlane(const BatchNormGradInputs& in, PerPlane per_plane) {
  for (int64_t s = 0; s < in.n; ++s)
    for (int64_t c = 0; c < in.channels; ++c) {
      const int64_t offset = (s * in.channels + c) * in.plane;
      const bool masks = in.act != FusedActivation::None;
      PlaneSource p{in.x + offset,
                    in.y ? in.y + offset : nullptr,
                    in.dy + offset,
                    simd::broadcast(in.mean[c]),
                    simd::broadcast(masks && !in.y ? in.scale[c] : 0.0f),
                    simd::broadcast(masks && !in.y ? in.shift[c] : 0.0f)};
      per_plane(p, c, offset);
    }
}

// The row layout's g: dy masked at y or at the recomputed input.
template <FusedActivation A>
inline float rowGrad(const BatchNormGradInputs& in, int64_t at, int64_t c) {
  if constexpr (A == FusedActivation::None) return in.dy[at];
  const float mask_at =
      in.y ? in.y[at] : batch_norm_lanes::normalised(in.x[at], in.mean[c], in.scale[c], in.shift[c]);
  return maskGrad<A>(activate<A>(mask_at), in.dy[at]);
}

template <FusedActivation A>
void gradSums(const BatchNormGradInputs& in, double* sum_g, double* sum_g_dev, float* masked) {
  if (in.plane == 1) {
    for (int64_t s = 0; s < in.n; ++s)
      for (int64_t c = 0; c < in.channels; ++c) {
        const int64_t at = s * in.channels + c;
        const float g = rowGrad<A>(in, at, c);
        if (masked) masked[at] = g;
        sum_g[c] += g;
        sum_g_dev[c] += static_cast<double>(g) * static_cast<double>(in.x[at] - in.mean[c]);
      }
    return;
  }
  const bool from_output = in.y != nullptr;
  forEachPlane(in, [&](const PlaneSource& p, int64_t c, int64_t offset) {
    float* out = masked ? masked + offset : nullptr;
    if (from_output && out)
      planeGradSums<A, true, true>(p, in.plane, sum_g[c], sum_g_dev[c], out);
    else if (from_output)
      planeGradSums<A, true, false>(p, in.plane, sum_g[c], sum_g_dev[c], out);
    else if (out)
      planeGradSums<A, false, true>(p, in.plane, sum_g[c], sum_g_dev[c], out);
    else
      planeGradSums<A, false, false>(p, in.plane, sum_g[c], sum_g_dev[c], out);
  });
}

template <FusedActivation A>
void inputGrad(const BatchNormGradInputs& in, const float* a, const float* b, const float* c, float* dx) {
  if (in.plane == 1) {
    for (int64_t s = 0; s < in.n; ++s)
      for (int64_t ch = 0; ch < in.channels; ++ch) {
        const int64_t at = s * in.channels + ch;
        const float g = rowGrad<A>(in, at, ch);
        dx[at] = std::fma(a[ch], g, b[ch] * (in.x[at] - in.mean[ch])) + c[ch];
      }
    return;
  }
  forEachPlane(in, [&](const PlaneSource& p, int64_t ch, int64_t offset) {
    const V8 va = simd::broadcast(a[ch]), vb = simd::broadcast(b[ch]), vc = simd::broadcast(c[ch]);
    if (in.y)
      planeInputGrad<A, true>(p, in.plane, va, vb, vc, dx + offset);
    else
      planeInputGrad<A, false>(p, in.plane, va, vb, vc, dx + offset);
  });
}

}  // namespace

void batchNormGradSums(const BatchNormGradInputs& in, double* sum_g, double* sum_g_dev, float* masked) {
  withActivation(in.act, [&](auto a) { gradSums<decltype(a)::value>(in, sum_g, sum_g_dev, masked); });
}

void batchNormInputGrad(const BatchNormGradInputs& in, const float* a, const float* b, const float* c,
                        float* dx) {
  withActivation(in.act, [&](auto k) { inputGrad<decltype(k)::value>(in, a, b, c, dx); });
}

}  // namespace dtrain::ops
