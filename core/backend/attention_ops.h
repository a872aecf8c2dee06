// Causal multi-head self-attention of GPT models, on the CPU, with memory
// linear in the sequence length: query rows are taken in blocks, each block's
// scores against its causal prefix of keys are formed by gemm, softmaxed
// exactly (max, exp, sum) and multiplied by the values; backward recomputes
// the probabilities block by block from q, k and the forward's log-sum-exp, so
// no seq x seq matrix is ever stored. Single-threaded per call, like the
// other ops (parallelism comes from one replica per thread); reentrant.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/backend/dropout_mask.h"

namespace dtrain::ops {

// qkv: [batch, seq, 3 * heads * head_dim] row-major: each token's row holds q (columns
// [0, C)), k ([C, 2C)) and v ([2C, 3C)), C = heads * head_dim; head h owns columns
// [h*head_dim, (h+1)*head_dim) of each. out: [batch, seq, C], head h in the same columns.
struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
};

// Attention-probability dropout (applied to the softmax's probabilities, inverted
// scaling); rate 0 = none, otherwise 0 < rate < 1. The mask of element (query i, key j)
// of head h of the sample at global index `sample_offset + b` is a pure function of
// (seed, sample, h, i, j) (attentionKeep below), so it does not depend on how the
// batch is split and backward recomputes it.
struct AttentionDropout {
  float rate = 0.0f;
  uint64_t seed = 0;
  int64_t sample_offset = 0;
};

// Query rows per block: the scratch holds two blocks of scores (Bq x seq).
constexpr int64_t kAttentionBlock = 64;

// Floats of scratch a call needs (forward and backward alike):
// 2 * kAttentionBlock * seq + kAttentionBlock, linear in seq.
int64_t attentionScratchFloats(const AttentionShape& s);

// Writes out and lse [batch, heads, seq] (the log-sum-exp of each query row's scaled
// scores over its keys 0..i, which backward reuses). Scale 1/sqrt(head_dim).
void causalAttentionForward(const AttentionShape& s, const float* qkv, float* out, float* lse,
                            const AttentionDropout& dropout, float* scratch);

// Writes dqkv [batch, seq, 3C] (overwrites every element) from dout [batch, seq, C], recomputing
// the probabilities block by block from qkv and lse (never storing seq x seq). out is the
// forward's output (for D_i = rowsum(dout_i * out_i)); dropout must be the forward's.
void causalAttentionBackward(const AttentionShape& s, const float* qkv, const float* out, const float* dout,
                             const float* lse, float* dqkv, const AttentionDropout& dropout, float* scratch);

// ------------------------------------------------------ the dropout mask --

// The 64-bit key of query row i of head h of global sample `sample`: splitmix64
// chained over (seed, sample, head, i), so nearby rows, heads and samples get
// unrelated keys. Element j of the row is then dropout_mask::keep(row key, j, ...).
DTRAIN_HOST_DEVICE inline uint64_t attentionRowKey(uint64_t seed, int64_t sample, int64_t head, int64_t i) {
  using dropout_mask::splitmix64;
  uint64_t key = splitmix64(seed ^ 0x5A7E3B1C9D2F4E61ull);  // a constant of its own: not dropout's keys
  key = splitmix64(key ^ static_cast<uint64_t>(sample));
  key = splitmix64(key ^ static_cast<uint64_t>(head));
  return splitmix64(key ^ static_cast<uint64_t>(i));
}

// Whether the probability of (query i, key j) of head h of global sample `sample`
// survives dropout at `rate` with `seed` (kept elements are scaled by 1 / (1 - rate)).
inline bool attentionKeep(uint64_t seed, float rate, int64_t sample, int64_t head, int64_t i, int64_t j) {
  return dropout_mask::keep(attentionRowKey(seed, sample, head, i), j, dropout_mask::dropThreshold(rate));
}

// --------------------------------------------------------------- exp --

// exp(x) for the softmax, written so that loops over it vectorise (no calls, no
// branches): x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 in two parts), exp(r)
// by Cephes' degree-7 polynomial, times 2^n through the exponent bits. Accurate to
// a couple of units in the last place for x >= -87 (the test measures it against
// std::exp); returns 0 below -87, where exp(x) < 1.7e-38 (the clamp keeps 2^n p normal).
// Inputs above 88 (overflow) are the caller's to avoid: here x <= 0 always.
inline float attentionExp(float x) {
  const float clamped = x < -87.0f ? -87.0f : x;
  // n = round(x / ln2) by the 1.5 * 2^23 shifter (round to nearest).
  const float shifter = 12582912.0f;
  const float t = std::fma(clamped, 1.44269504088896341f, shifter);
  const float n = t - shifter;
  float r = std::fma(n, -0.693359375f, clamped);  // ln2's high part: 9 bits, exact product
  r = std::fma(n, 2.12194440e-4f, r);             // ln2 - 0.693359375
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  // 2^n: n is in [-126, 0] here, so adding n to the exponent field stays normal.
  int32_t p_bits, t_bits;
  std::memcpy(&p_bits, &p, sizeof p_bits);
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const uint32_t keep = 0u - static_cast<uint32_t>(x >= -87.0f);
  const uint32_t bits = static_cast<uint32_t>(p_bits + (t_bits - 0x4B400000) * (1 << 23)) & keep;
  float y;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

}  // namespace dtrain::ops
