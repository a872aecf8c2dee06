// The batch_norm passes of core/backend/batch_norm_ops.h. Two layouts: planes
// (plane > 1: a loop per (sample, channel) over its contiguous plane, the
// channel's constants held in registers) and rows (plane == 1: a loop per
// sample over its contiguous channels, the constants loaded per lane). The
// inner loops are plain enough for the compiler to vectorise (they are
// written without reassociation, so they need no -ffast-math): eight
// explicit float lanes for the plane sums, element-wise loops otherwise.
// The exception is the gradient sums, whose masked loops the compiler leaves
// scalar: written with AVX2 where the build targets it, else through a masked
// block buffer. The activation is a template parameter, so no branch is left
// in a loop.
#include "core/backend/batch_norm_ops.h"

#include <algorithm>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace dtrain::ops {

namespace {

// Elements a block of lanes sums in float before its sum moves to double:
// 128 terms per lane.
constexpr int64_t kSumBlock = 1024;

inline float laneSum(const float (&acc)[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// sum of term(i) for i < len: float lanes per block, blocks in double.
template <class Term>
double blockedSum(int64_t len, Term term) {
  double total = 0.0;
  for (int64_t start = 0; start < len; start += kSumBlock) {
    const int64_t end = std::min(len, start + kSumBlock);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = start;
    for (; i + 8 <= end; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += term(i + k);
    float s = laneSum(acc);
    for (; i < end; ++i) s += term(i);
    total += s;
  }
  return total;
}

#if defined(__AVX2__) && defined(__FMA__)

// g = dy where the activation passed a gradient at y (maskGrad, 8 lanes).
template <FusedActivation A>
inline __m256 maskGradV(const float* y, __m256 g) {
  if constexpr (A == FusedActivation::None) return g;
  const __m256 out = _mm256_loadu_ps(y);
  __m256 pass = _mm256_cmp_ps(out, _mm256_setzero_ps(), _CMP_GT_OQ);
  if constexpr (A == FusedActivation::Relu6)
    pass = _mm256_and_ps(pass, _mm256_cmp_ps(out, _mm256_set1_ps(6.0f), _CMP_LT_OQ));
  return _mm256_and_ps(pass, g);
}

inline float laneSum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  return laneSum(lanes);
}

// sum of g and of g * (v - m) over one plane of len values, g = dy masked by
// the activation at y: one pass reading v, y and dy once (the compiler does
// not vectorise the masked sums on its own), two vectors of each sum in
// flight; float lanes per block, blocks in double.
template <FusedActivation A>
void gradSumsPlane(const float* v, const float* y, const float* dy, float m, int64_t len, double& total_g,
                   double& total_g_dev) {
  const __m256 mv = _mm256_set1_ps(m);
  for (int64_t start = 0; start < len; start += kSumBlock) {
    const int64_t count = std::min(len - start, kSumBlock);
    const float* x = v + start;
    const float* g = dy + start;
    const float* out = A == FusedActivation::None ? nullptr : y + start;
    __m256 sg0 = _mm256_setzero_ps(), sg1 = _mm256_setzero_ps();
    __m256 sd0 = _mm256_setzero_ps(), sd1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
      const __m256 g0 = maskGradV<A>(out + i, _mm256_loadu_ps(g + i));
      const __m256 g1 = maskGradV<A>(out + i + 8, _mm256_loadu_ps(g + i + 8));
      sg0 = _mm256_add_ps(sg0, g0);
      sg1 = _mm256_add_ps(sg1, g1);
      sd0 = _mm256_fmadd_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i), mv), sd0);
      sd1 = _mm256_fmadd_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv), sd1);
    }
    float sg = laneSum(_mm256_add_ps(sg0, sg1)), sd = laneSum(_mm256_add_ps(sd0, sd1));
    for (; i < count; ++i) {
      const float gi = A == FusedActivation::None ? g[i] : maskGrad<A>(out[i], g[i]);
      sg += gi;
      sd += gi * (x[i] - m);
    }
    total_g += sg;
    total_g_dev += sd;
  }
}

#else

// sum of g and of g * (v - m) over one plane of len values, g = dy masked by
// the activation at y. Masking a block into a buffer first leaves the sums
// plain loops that the compiler vectorises (a select inside them does not).
template <FusedActivation A>
void gradSumsPlane(const float* v, const float* y, const float* dy, float m, int64_t len, double& total_g,
                   double& total_g_dev) {
  alignas(32) float masked[kSumBlock];
  for (int64_t start = 0; start < len; start += kSumBlock) {
    const int64_t count = std::min(len - start, kSumBlock);
    const float* x = v + start;
    const float* g = dy + start;
    if constexpr (A != FusedActivation::None) {
      const float* __restrict out = y + start;
      for (int64_t i = 0; i < count; ++i) masked[i] = maskGrad<A>(out[i], g[i]);
      g = masked;
    }
    // Two loops over the (L1-resident) block: one accumulator array per loop
    // is what the compiler turns into vector adds.
    float acc_g[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc_d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t whole = count - count % 8;
    for (int64_t i = 0; i < whole; i += 8)
      for (int k = 0; k < 8; ++k) acc_g[k] += g[i + k];
    for (int64_t i = 0; i < whole; i += 8)
      for (int k = 0; k < 8; ++k) acc_d[k] += g[i + k] * (x[i + k] - m);
    float sg = laneSum(acc_g), sd = laneSum(acc_d);
    for (int64_t i = whole; i < count; ++i) {
      sg += g[i];
      sd += g[i] * (x[i] - m);
    }
    total_g += sg;
    total_g_dev += sd;
  }
}

#endif

template <FusedActivation A>
void applyPlanes(const float* x, float* y, int64_t n, int64_t channels, int64_t plane, const float* mean,
                 const float* scale, const float* shift) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const float* __restrict v = x + (s * channels + c) * plane;
      float* __restrict out = y + (s * channels + c) * plane;
      const float m = mean[c], k = scale[c], b = shift[c];
      for (int64_t i = 0; i < plane; ++i) out[i] = activate<A>((v[i] - m) * k + b);
    }
}

template <FusedActivation A>
void applyPlanesResidual(const float* x, float* y, int64_t n, int64_t channels, int64_t plane,
                         const float* mean, const float* scale, const float* shift, const float* residual) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t offset = (s * channels + c) * plane;
      const float* __restrict v = x + offset;
      const float* __restrict r = residual + offset;
      float* __restrict out = y + offset;
      const float m = mean[c], k = scale[c], b = shift[c];
      for (int64_t i = 0; i < plane; ++i) {
        const float normalised = (v[i] - m) * k + b;
        out[i] = activate<A>(normalised + r[i]);
      }
    }
}

template <FusedActivation A>
void applyRows(const float* x, float* y, int64_t n, int64_t channels, const float* __restrict mean,
               const float* __restrict scale, const float* __restrict shift) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    float* __restrict out = y + s * channels;
    for (int64_t c = 0; c < channels; ++c) out[c] = activate<A>((v[c] - mean[c]) * scale[c] + shift[c]);
  }
}

template <FusedActivation A>
void applyRowsResidual(const float* x, float* y, int64_t n, int64_t channels, const float* __restrict mean,
                       const float* __restrict scale, const float* __restrict shift, const float* residual) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    const float* __restrict r = residual + s * channels;
    float* __restrict out = y + s * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const float normalised = (v[c] - mean[c]) * scale[c] + shift[c];
      out[c] = activate<A>(normalised + r[c]);
    }
  }
}

template <FusedActivation A>
void gradSumsPlanes(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                    int64_t plane, const float* mean, double* sum_g, double* sum_g_dev) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t offset = (s * channels + c) * plane;
      gradSumsPlane<A>(x + offset, A == FusedActivation::None ? nullptr : y + offset, dy + offset, mean[c],
                       plane, sum_g[c], sum_g_dev[c]);
    }
}

template <FusedActivation A>
void gradSumsRows(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                  const float* __restrict mean, double* __restrict sum_g, double* __restrict sum_g_dev) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    const float* __restrict out = A == FusedActivation::None ? nullptr : y + s * channels;
    const float* __restrict d = dy + s * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const float g = A == FusedActivation::None ? d[c] : maskGrad<A>(out[c], d[c]);
      sum_g[c] += g;
      sum_g_dev[c] += static_cast<double>(g) * static_cast<double>(v[c] - mean[c]);
    }
  }
}

template <FusedActivation A>
void inputGradPlanes(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                     int64_t plane, const float* mean, const float* a, const float* b, const float* c,
                     float* dx) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t ch = 0; ch < channels; ++ch) {
      const int64_t offset = (s * channels + ch) * plane;
      const float* __restrict v = x + offset;
      const float* __restrict out = A == FusedActivation::None ? nullptr : y + offset;
      const float* __restrict d = dy + offset;
      float* __restrict g_in = dx + offset;
      const float m = mean[ch], ka = a[ch], kb = b[ch], kc = c[ch];
      for (int64_t i = 0; i < plane; ++i) {
        const float g = A == FusedActivation::None ? d[i] : maskGrad<A>(out[i], d[i]);
        g_in[i] = ka * g + kb * (v[i] - m) + kc;
      }
    }
}

template <FusedActivation A>
void inputGradRows(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                   const float* __restrict mean, const float* __restrict a, const float* __restrict b,
                   const float* __restrict c, float* dx) {
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict v = x + s * channels;
    const float* __restrict out = A == FusedActivation::None ? nullptr : y + s * channels;
    const float* __restrict d = dy + s * channels;
    float* __restrict g_in = dx + s * channels;
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float g = A == FusedActivation::None ? d[ch] : maskGrad<A>(out[ch], d[ch]);
      g_in[ch] = a[ch] * g + b[ch] * (v[ch] - mean[ch]) + c[ch];
    }
  }
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
  // Two sums over each plane: the second reads it from L1 (MobileNetV2's
  // largest plane, 48x48, is 9 KB).
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const float* __restrict v = x + (s * channels + c) * plane;
      const float k = shift[c];
      sums[c] += blockedSum(plane, [v, k](int64_t i) { return v[i] - k; });
      squares[c] += blockedSum(plane, [v, k](int64_t i) {
        const float d = v[i] - k;
        return d * d;
      });
    }
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
    for (int64_t c = 0; c < channels; ++c) {
      const float* __restrict v = x + (s * channels + c) * plane;
      const float m = mean[c];
      sums[c] += blockedSum(plane, [v, m](int64_t i) {
        const float d = v[i] - m;
        return d * d;
      });
    }
}

void batchNormApply(const float* x, float* y, int64_t n, int64_t channels, int64_t plane, const float* mean,
                    const float* scale, const float* shift, const float* residual, FusedActivation act) {
  withActivation(act, [&](auto a) {
    constexpr FusedActivation A = decltype(a)::value;
    if (residual && plane == 1)
      applyRowsResidual<A>(x, y, n, channels, mean, scale, shift, residual);
    else if (residual)
      applyPlanesResidual<A>(x, y, n, channels, plane, mean, scale, shift, residual);
    else if (plane == 1)
      applyRows<A>(x, y, n, channels, mean, scale, shift);
    else
      applyPlanes<A>(x, y, n, channels, plane, mean, scale, shift);
  });
}

void fusedActivationGrad(const float* y, const float* dy, float* g, int64_t count, FusedActivation act) {
  withActivation(act, [&](auto a) {
    constexpr FusedActivation A = decltype(a)::value;
    for (int64_t i = 0; i < count; ++i) g[i] = maskGrad<A>(A == FusedActivation::None ? 0.0f : y[i], dy[i]);
  });
}

void batchNormGradSums(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                       int64_t plane, FusedActivation act, const float* mean, double* sum_g,
                       double* sum_g_dev) {
  withActivation(act, [&](auto a) {
    if (plane == 1)
      gradSumsRows<decltype(a)::value>(x, y, dy, n, channels, mean, sum_g, sum_g_dev);
    else
      gradSumsPlanes<decltype(a)::value>(x, y, dy, n, channels, plane, mean, sum_g, sum_g_dev);
  });
}

void batchNormInputGrad(const float* x, const float* y, const float* dy, int64_t n, int64_t channels,
                        int64_t plane, FusedActivation act, const float* mean, const float* a, const float* b,
                        const float* c, float* dx) {
  withActivation(act, [&](auto k) {
    if (plane == 1)
      inputGradRows<decltype(k)::value>(x, y, dy, n, channels, mean, a, b, c, dx);
    else
      inputGradPlanes<decltype(k)::value>(x, y, dy, n, channels, plane, mean, a, b, c, dx);
  });
}

}  // namespace dtrain::ops
