// Inverted dropout with a stateless, counter-based mask.
//
// Each row (sample) gets a 64-bit key = splitmix64 of (seed, layer, global
// sample index); element e of the row is kept when a 32-bit hash of (key, e)
// is at least rate * 2^32. The element hash is two rounds of a 32-bit
// multiply-xorshift mixer keyed by the two halves of the row key, so it
// vectorises (8 lanes of 32-bit multiplies under AVX2) and costs about as much
// as the memory pass itself. Being a pure function of the global sample index,
// the mask does not depend on thread or rank splits, and backward recomputes it.
#include <cmath>

#include "core/backend/ops.h"
#include "core/util/rng.h"

namespace dtrain::ops {

namespace {

// Chris Wellons' "lowbias32" integer hash (a bijection on 32-bit values).
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

inline uint64_t rowKey(const DropoutKey& key, int64_t row) {
  uint64_t k = splitmix64(key.seed ^ splitmix64(static_cast<uint64_t>(key.layer) + 0x632BE59BD9B4E019ull));
  return splitmix64(k ^ static_cast<uint64_t>(key.first_sample + row));
}

// Elements with hash < threshold are dropped.
inline uint32_t dropThreshold(float rate) {
  double t = std::ldexp(static_cast<double>(rate), 32);
  if (t <= 0.0) return 0;
  if (t >= 4294967295.0) return 4294967295u;
  return static_cast<uint32_t>(t);
}

// out[e] = keep(e) ? in[e] * scale : 0 for one row.
void applyRow(const float* __restrict in, float* __restrict out, int64_t cols, uint64_t row_key,
              uint32_t threshold, float scale) {
  const uint32_t lo = static_cast<uint32_t>(row_key), hi = static_cast<uint32_t>(row_key >> 32);
  for (int64_t e = 0; e < cols; ++e) {
    const uint32_t h = mix32(mix32(static_cast<uint32_t>(e) + lo) ^ hi);
    out[e] = h >= threshold ? in[e] * scale : 0.0f;
  }
}

void apply(const float* in, float* out, int64_t rows, int64_t cols, float rate, const DropoutKey& key) {
  const uint32_t threshold = dropThreshold(rate);
  const float scale = 1.0f / (1.0f - rate);
  for (int64_t r = 0; r < rows; ++r)
    applyRow(in + r * cols, out + r * cols, cols, rowKey(key, r), threshold, scale);
}

}  // namespace

void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate, const DropoutKey& key) {
  apply(x, y, rows, cols, rate, key);
}

void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const DropoutKey& key) {
  apply(dy, dx, rows, cols, rate, key);
}

}  // namespace dtrain::ops
