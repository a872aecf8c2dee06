// Causal self-attention on the CPU (core/backend/attention_ops.h), flash-attention
// style: per (sample, head), query rows in blocks of kAttentionBlock; a block
// [i0, i1) attends to keys [0, i1). Its scores S = scale Q K^T are one gemm
// straight out of qkv (leading dimension 3C, no copies), the exact softmax of
// each row runs over its keys 0..i (the rest of the block's columns zeroed), and
// O = P V is a second gemm. Backward recomputes P = exp(S - lse) per block and
// forms dQ, dK and dV with gemms; memory is two blocks of scores, linear in seq.
//
// The element passes are plain loops that GCC vectorises (attentionExp has no
// calls or branches; the dropout hash is 32-bit multiplies); sums and maxima
// run on kLanes independent lanes, so they vectorise without reassociating
// anything the compiler may not.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/backend/attention_ops.h"
#include "core/backend/cpu/float_lanes.h"
#include "core/backend/dropout_mask.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

namespace {

using lanes::kLanes;
using lanes::rowMax;

float laneSum(const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  for (; j < n; ++j) acc[0] += x[j];
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

float dotLanes(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  for (; j < n; ++j) acc[0] += a[j] * b[j];
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

// s[j] = exp(s[j] - shift) for j < n.
void expShifted(float* __restrict s, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j) s[j] = attentionExp(s[j] - shift);
}

void scaleRow(float* __restrict s, int64_t n, float f) {
  for (int64_t j = 0; j < n; ++j) s[j] *= f;
}

// s[j] = keep(j) ? s[j] * f : 0 for j < n.
void scaleMasked(float* __restrict s, int64_t n, float f, uint64_t row_key, uint32_t threshold) {
  for (int64_t j = 0; j < n; ++j)
    s[j] = dropout_mask::keptOrZero(s[j] * f, dropout_mask::keep(row_key, j, threshold));
}

// Backward's element pass over one query row's keys j < n, with s the scores and
// dp = dO_i . v_j on entry: P = exp(s - lse); with the mask factor m_j (keep ?
// 1/(1-rate) : 0, or 1 without dropout) O_i = sum_j P_ij m_j v_j, so
// dL/dP_ij = m_j dp_j and, through the softmax, dS_ij = P_ij (m_j dp_j - D_i)
// with D_i = sum_j P_ij m_j dp_j = dO_i . O_i. Leaves s = P m (for dV) and
// dp = dS (for dQ and dK).
void gradRow(float* __restrict s, float* __restrict dp, int64_t n, float lse, float d) {
  for (int64_t j = 0; j < n; ++j) {
    const float p = attentionExp(s[j] - lse);
    dp[j] = p * (dp[j] - d);
    s[j] = p;
  }
}

void gradRowMasked(float* __restrict s, float* __restrict dp, int64_t n, float lse, float d, uint64_t row_key,
                   uint32_t threshold, float kept_scale) {
  for (int64_t j = 0; j < n; ++j) {
    const float p = attentionExp(s[j] - lse);
    const float m = dropout_mask::keptOrZero(kept_scale, dropout_mask::keep(row_key, j, threshold));
    dp[j] = p * (dp[j] * m - d);
    s[j] = p * m;
  }
}

// The columns of one (sample, head) inside qkv / out and their strides.
struct HeadView {
  int64_t ld_qkv, ld_out;  // 3C, C
  int64_t q_off, k_off, v_off, o_off;
};

HeadView headView(const AttentionShape& s, int64_t b, int64_t h) {
  const int64_t c = s.heads * s.head_dim;
  HeadView v;
  v.ld_qkv = 3 * c;
  v.ld_out = c;
  v.q_off = b * s.seq * 3 * c + h * s.head_dim;
  v.k_off = v.q_off + c;
  v.v_off = v.q_off + 2 * c;
  v.o_off = b * s.seq * c + h * s.head_dim;
  return v;
}

float scaleOf(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

}  // namespace

int64_t attentionScratchFloats(const AttentionShape& s) {
  return 2 * kAttentionBlock * s.seq + kAttentionBlock;
}

void causalAttentionForward(const AttentionShape& s, const float* qkv, float* out, float* lse,
                            const AttentionDropout& dropout, float* scratch) {
  const float scale = scaleOf(s);
  const bool drop = dropout.rate > 0.0f;
  const uint32_t threshold = drop ? dropout_mask::dropThreshold(dropout.rate) : 0;
  const float kept_scale = drop ? dropout_mask::keptScale(dropout.rate) : 1.0f;
  const int64_t dim = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = headView(s, b, h);
      const int64_t ld = hv.ld_qkv;
      float* row_lse = lse + (b * s.heads + h) * s.seq;
      for (int64_t i0 = 0; i0 < s.seq; i0 += kAttentionBlock) {
        const int64_t i1 = std::min(i0 + kAttentionBlock, s.seq), m = i1 - i0, n = i1;
        float* sc = scratch;  // [m, n]
        gemm(false, true, m, n, dim, scale, qkv + hv.q_off + i0 * ld, ld, qkv + hv.k_off, ld, 0.0f, sc, n);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r, len = i + 1;
          float* row = sc + r * n;
          const float mx = rowMax(row, len);
          expShifted(row, len, mx);
          const float sum = laneSum(row, len);
          row_lse[i] = mx + std::log(sum);
          if (drop)
            scaleMasked(row, len, kept_scale / sum,
                        attentionRowKey(dropout.seed, dropout.sample_offset + b, h, i), threshold);
          else
            scaleRow(row, len, 1.0f / sum);
          std::memset(row + len, 0, static_cast<size_t>(n - len) * sizeof(float));
        }
        gemm(false, false, m, dim, n, 1.0f, sc, n, qkv + hv.v_off, ld, 0.0f, out + hv.o_off + i0 * hv.ld_out,
             hv.ld_out);
      }
    }
}

void causalAttentionBackward(const AttentionShape& s, const float* qkv, const float* out, const float* dout,
                             const float* lse, float* dqkv, const AttentionDropout& dropout, float* scratch) {
  const float scale = scaleOf(s);
  const bool drop = dropout.rate > 0.0f;
  const uint32_t threshold = drop ? dropout_mask::dropThreshold(dropout.rate) : 0;
  const float kept_scale = drop ? dropout_mask::keptScale(dropout.rate) : 1.0f;
  const int64_t dim = s.head_dim, c = s.heads * s.head_dim;
  float* sc = scratch;                                // [m, n]: scores, then P m
  float* dp = scratch + kAttentionBlock * s.seq;      // [m, n]: dO V^T, then dS
  float* dd = scratch + 2 * kAttentionBlock * s.seq;  // [m]: D_i
  for (int64_t b = 0; b < s.batch; ++b) {
    // dK and dV accumulate over the query blocks; dQ's rows are written once each.
    for (int64_t t = 0; t < s.seq; ++t)
      std::memset(dqkv + (b * s.seq + t) * 3 * c + c, 0, static_cast<size_t>(2 * c) * sizeof(float));
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = headView(s, b, h);
      const int64_t ld = hv.ld_qkv, ldo = hv.ld_out;
      const float* row_lse = lse + (b * s.heads + h) * s.seq;
      for (int64_t i0 = 0; i0 < s.seq; i0 += kAttentionBlock) {
        const int64_t i1 = std::min(i0 + kAttentionBlock, s.seq), m = i1 - i0, n = i1;
        const float* q_blk = qkv + hv.q_off + i0 * ld;
        const float* do_blk = dout + hv.o_off + i0 * ldo;
        gemm(false, true, m, n, dim, scale, q_blk, ld, qkv + hv.k_off, ld, 0.0f, sc, n);
        gemm(false, true, m, n, dim, 1.0f, do_blk, ldo, qkv + hv.v_off, ld, 0.0f, dp, n);
        for (int64_t r = 0; r < m; ++r)
          dd[r] = dotLanes(do_blk + r * ldo, out + hv.o_off + (i0 + r) * ldo, dim);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r, len = i + 1;
          float* srow = sc + r * n;
          float* dprow = dp + r * n;
          if (drop)
            gradRowMasked(srow, dprow, len, row_lse[i], dd[r],
                          attentionRowKey(dropout.seed, dropout.sample_offset + b, h, i), threshold,
                          kept_scale);
          else
            gradRow(srow, dprow, len, row_lse[i], dd[r]);
          std::memset(srow + len, 0, static_cast<size_t>(n - len) * sizeof(float));
          std::memset(dprow + len, 0, static_cast<size_t>(n - len) * sizeof(float));
        }
        // dQ_blk = scale dS K; dK[0:n] += scale dS^T Q_blk; dV[0:n] += (P m)^T dO_blk.
        gemm(false, false, m, dim, n, scale, dp, n, qkv + hv.k_off, ld, 0.0f, dqkv + hv.q_off + i0 * ld, ld);
        gemm(true, false, n, dim, m, scale, dp, n, q_blk, ld, 1.0f, dqkv + hv.k_off, ld);
        gemm(true, false, n, dim, m, 1.0f, sc, n, do_blk, ldo, 1.0f, dqkv + hv.v_off, ld);
      }
    }
  }
}

}  // namespace dtrain::ops
