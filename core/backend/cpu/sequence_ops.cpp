// The sequence-model passes (core/backend/sequence_ops.h) as plain loops that
// GCC vectorises at -O3 for the x86-64-v3 baseline without -ffast-math: row
// sums run on kLanes independent lanes (a vector reduction needs no
// reassociation then), and GELU's tanh is a sigmoid built on attentionExp
// (no libm calls, no branches).
#include "core/backend/sequence_ops.h"

#include <cmath>
#include <cstring>

#include "core/backend/attention_ops.h"
#include "core/backend/cpu/float_lanes.h"

namespace dtrain::ops {

namespace {

// Independent partial sums per row (two ymm registers of floats), so that the
// adds of a row pipeline instead of waiting on one another and vectorise
// without reassociating anything; the lanes are added in double at the end.
// One sum per loop: GCC vectorises two reductions sharing a loop as the outer
// loop, with lane shuffles that cost more than a second pass over the row
// (it is in L1).
using lanes::kLanes;
using lanes::shiftedSum;

double laneTotal(const float (&acc)[kLanes]) {
  double sum = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

// Sum of (x[c] - shift)^2.
double shiftedSquares(const float* __restrict x, int64_t n, float shift) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float d = x[c + l] - shift;
      acc[l] += d * d;
    }
  for (int64_t l = 0; c + l < n; ++l) {
    const float d = x[c + l] - shift;
    acc[l] += d * d;
  }
  return laneTotal(acc);
}

// Sum of g = dy * gamma; dbeta += dy.
double gradSum(const float* __restrict dy, const float* __restrict gamma, int64_t n,
               float* __restrict dbeta) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      acc[l] += dy[c + l] * gamma[c + l];
      dbeta[c + l] += dy[c + l];
    }
  for (int64_t l = 0; c + l < n; ++l) {
    acc[l] += dy[c + l] * gamma[c + l];
    dbeta[c + l] += dy[c + l];
  }
  return laneTotal(acc);
}

// Sum of g * xhat, xhat = (x - m) * s; dgamma += dy * xhat.
double gradXhatSum(const float* __restrict x, const float* __restrict dy, const float* __restrict gamma,
                   int64_t n, float m, float s, float* __restrict dgamma) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float xhat = (x[c + l] - m) * s;
      acc[l] += dy[c + l] * gamma[c + l] * xhat;
      dgamma[c + l] += dy[c + l] * xhat;
    }
  for (int64_t l = 0; c + l < n; ++l) {
    const float xhat = (x[c + l] - m) * s;
    acc[l] += dy[c + l] * gamma[c + l] * xhat;
    dgamma[c + l] += dy[c + l] * xhat;
  }
  return laneTotal(acc);
}

void normaliseRow(const float* __restrict x, int64_t n, float m, float s, const float* __restrict gamma,
                  const float* __restrict beta, float* __restrict y) {
  for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - m) * s * gamma[c] + beta[c];
}

void rowInputGrad(const float* __restrict x, const float* __restrict dy, const float* __restrict gamma,
                  int64_t n, float m, float s, float g_mean, float gx_mean, float* __restrict dx) {
  for (int64_t c = 0; c < n; ++c) {
    const float xhat = (x[c] - m) * s;
    dx[c] = s * (dy[c] * gamma[c] - g_mean - xhat * gx_mean);
  }
}

}  // namespace

// The statistics in passes over the row (it stays in L1). A provisional mean
// m0 from float lanes (whatever its rounding, it only has to be near the
// mean); then the deviations d = x - m0 (exact by Sterbenz for x within a
// factor 2 of m0, so a row of 1000 + small deviations keeps them all):
// mean = m0 + sum(d) / n and variance = sum(d^2) / n - (sum(d) / n)^2, the
// correction small as m0 is near the mean. With k = ceil(n / kLanes) values
// per lane and e = 2^-24: sum(d^2) is within (k + 1) e of its exact value (2 e
// for a square's deviation, k - 1 adds), so rstd within (k + 1) e / 2 + e
// (13.5 e for 384 columns); the mean within e |mean| + k e mean|x - m0|.
// tests/backend/sequence_ops_test.cpp derives its tolerances from these.
void layerNormForward(const float* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                      float eps, float* y, float* mean, float* rstd) {
  const double inv_cols = 1.0 / static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float m0 = static_cast<float>(shiftedSum(xr, cols, 0.0f) * inv_cols);
    const double shift = shiftedSum(xr, cols, m0) * inv_cols;
    const double var = shiftedSquares(xr, cols, m0) * inv_cols - shift * shift;
    const float m = static_cast<float>(m0 + shift);
    const float s = static_cast<float>(1.0 / std::sqrt((var > 0.0 ? var : 0.0) + eps));
    mean[r] = m;
    rstd[r] = s;
    normaliseRow(xr, cols, m, s, gamma, beta, y + r * cols);
  }
}

// dgamma and dbeta must not alias the inputs.
void layerNormBackward(const float* x, const float* dy, int64_t rows, int64_t cols, const float* gamma,
                       const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta) {
  const double inv_cols = 1.0 / static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float m = mean[r], s = rstd[r];
    const double g_sum = gradSum(dyr, gamma, cols, dbeta);
    const double gx_sum = gradXhatSum(xr, dyr, gamma, cols, m, s, dgamma);
    if (!dx) continue;
    rowInputGrad(xr, dyr, gamma, cols, m, s, static_cast<float>(g_sum * inv_cols),
                 static_cast<float>(gx_sum * inv_cols), dx + r * cols);
  }
}

namespace {

constexpr float kGeluK2 = 1.5957691216057308f;  // 2 sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;
constexpr float kGeluC3 = 0.134145f;  // 3 * 0.044715

// With u = sqrt(2/pi) (v + 0.044715 v^3) and e = exp(-2|u|) in (0, 1]:
// p = 1 / (1 + e) and q = e / (1 + e), that is sigmoid(2|u|) and
// sigmoid(-2|u|). Then (1 + tanh u) / 2 = sigmoid(2u) is p for v >= 0 and q
// for v < 0, and (1 - tanh^2 u) / 4 = p q: no 1 + tanh or 1 - tanh^2 is ever
// formed, so nothing cancels, and attentionExp stays on its domain x <= 0
// (-2|u| = -2 sqrt(2/pi) |v| (1 + 0.044715 v^2), u has the sign of v). For
// 2|u| > 87 (v < -9.2) attentionExp gives e = 0, so gelu = -0 and gelu' = 0
// where they are below 1e-36 in magnitude.
//
// Error bounds against the formulas in exact arithmetic, first order, in
// units of e = 2^-24, with a = 2|u|:
//   a: the constants 2 sqrt(2/pi) and 0.044715 rounded to float (1 each),
//     v^2 and the fma for 1 + 0.044715 v^2 (at most 3 together), two
//     products: within 6 a. exp: within 2 relative (attentionExp, measured
//     over every float in [-87, 0]: 1.99), so e within 2 + 6 a. p within
//     2 + (2 + 6 a) e / (1 + e) (the add and the division), q = e p within
//     3 + (2 + 6 a) / (1 + e).
//   gelu = v p or v q, one product more: relative error at most
//     3 + (2 + 6 a) e / (1 + e) <= 5.2 for v >= 0, and 4 + (2 + 6 a) / (1 + e)
//     for v < 0, where |gelu| ((2 + 6 a) / (1 + e) - 2) <= 1.51 (its maximum
//     over v < 0, near v = -1), so in all
//       |gelu - exact| <= 6 e |exact| + 1.51 e   (1.51 e = 9e-8).
//     The relative error alone grows with a in the negative tail (about 195 e
//     measured at v = -9.2, where |gelu| ~ 1e-37); it is a few e once
//     |gelu| >> 0.25 e.
//   gelu' = s + b p q, s = p or q: b within 6 (like a), p q within 6 + (2 +
//     6 a) (1 - e) / (1 + e), the fma 1. Where the two terms have the same
//     sign (v >= 0, and v < -0.75 up to a factor) this is relative; at the
//     zero of gelu' (v ~ -0.75) it is absolute. The first-order bound,
//     |s| err(s) + |b p q| (err(b) + err(p q)) + |gelu'|, is at most
//     9 |gelu'| + 6.3 over all v (evaluated in steps of 1e-4), that is
//       |gelu' - exact| <= 9 e |exact| + 6.3 e,
//     and dx = dy gelu' adds e |dx|.
// Measured over every float in [-10, 10]: gelu at most 6 e |exact| + 0.41 e,
// gelu' at most 10 e |exact| + 1.19 e. NaN in x gives NaN (gelu = NaN * ...,
// and b = NaN in gelu'); x = +inf gives gelu = inf, gelu' = 1; x = -inf gives
// NaN (-inf * 0, as the formula) and gelu' = 0.
struct GeluSigmoid {
  float p, q;
};

// c ? a : b by bit masks. A plain ?: whose operands are computed only for it
// gets those computations moved into its arms, and with -ftrapping-math GCC
// then refuses to if-convert (a float operation there "could trap"), so the
// loop does not vectorise.
inline float pick(bool c, float a, float b) {
  uint32_t a_bits, b_bits;
  std::memcpy(&a_bits, &a, sizeof a_bits);
  std::memcpy(&b_bits, &b, sizeof b_bits);
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  const uint32_t bits = (a_bits & mask) | (b_bits & ~mask);
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

inline GeluSigmoid geluSigmoid(float v) {
  const float w = std::fma(kGeluC, v * v, 1.0f);
  const float e = attentionExp(-(kGeluK2 * std::fabs(v)) * w);
  const float p = 1.0f / (1.0f + e);
  return {p, e * p};
}

}  // namespace

// gelu(v) = v (1 + tanh u) / 2 = v sigmoid(2u).
void geluForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const GeluSigmoid t = geluSigmoid(v);
    y[i] = v * pick(v >= 0.0f, t.p, t.q);
  }
}

// gelu'(v) = (1 + tanh u) / 2 + v (1 - tanh^2 u) / 2 * du/dv
//          = sigmoid(2u) + b p q, b = 2 sqrt(2/pi) v (1 + 3 * 0.044715 v^2).
// b is taken at 0 for |v| >= 16: there e = 0 (2|u| > 300) so p q = 0, and b
// would overflow from |v| ~ 1e13 (inf * 0 = NaN). NaN passes through.
void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const GeluSigmoid t = geluSigmoid(v);
    const float s = pick(v >= 0.0f, t.p, t.q);
    const float vc = pick(std::fabs(v) >= 16.0f, 0.0f, v);
    const float b = kGeluK2 * vc * std::fma(kGeluC3, vc * vc, 1.0f);
    dx[i] = dy[i] * std::fma(b, t.p * t.q, s);
  }
}

int64_t embeddingForward(const float* ids, int64_t tokens, const float* table, int64_t rows, int64_t dim,
                         float* y) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float id = ids[t];
    // The negation catches NaN too.
    if (!(id >= 0.0f && id < static_cast<float>(rows)) || id != std::floor(id)) return t;
    const float* __restrict src = table + static_cast<int64_t>(id) * dim;
    float* __restrict dst = y + t * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] = src[c];
  }
  return -1;
}

void embeddingBackward(const float* ids, int64_t tokens, const float* dy, int64_t dim, float* dtable) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* __restrict dst = dtable + static_cast<int64_t>(ids[t]) * dim;
    const float* __restrict src = dy + t * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] += src[c];
  }
}

}  // namespace dtrain::ops
