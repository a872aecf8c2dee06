// The dropout mask as a pure function, shared by the CPU (cpu/dropout.cpp)
// and the CUDA kernels (cuda/dropout_kernels.cu) so both keep exactly the same
// elements with exactly the same scale.
//
// Each row (sample) gets a 64-bit key = splitmix64 of (seed, layer, global
// sample index); element e of the row is kept when a 32-bit hash of (key, e)
// is at least rate * 2^32. The element hash is two rounds of a 32-bit
// multiply-xorshift mixer keyed by the two halves of the row key, so it
// vectorises (8 lanes of 32-bit multiplies under AVX2) and costs about as much
// as the memory pass itself.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/backend/host_device.h"

namespace dtrain::dropout_mask {

// splitmix64 (Steele, Lea, Flood 2014) as a hash of one 64-bit value. The same
// function as dtrain::splitmix64 in core/util/rng.h, repeated here because
// device code can only call functions marked for the device.
DTRAIN_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Chris Wellons' "lowbias32" integer hash (a bijection on 32-bit values).
DTRAIN_HOST_DEVICE inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The part of every row key that depends only on (seed, layer).
DTRAIN_HOST_DEVICE inline uint64_t layerKey(uint64_t seed, int64_t layer) {
  return splitmix64(seed ^ splitmix64(static_cast<uint64_t>(layer) + 0x632BE59BD9B4E019ull));
}

// The key of the row holding global sample `sample`.
DTRAIN_HOST_DEVICE inline uint64_t rowKey(uint64_t layer_key, int64_t sample) {
  return splitmix64(layer_key ^ static_cast<uint64_t>(sample));
}

// Whether element e of a row with key row_key is kept. The element index is
// taken modulo 2^32 (rows are far shorter).
DTRAIN_HOST_DEVICE inline bool keep(uint64_t row_key, int64_t e, uint32_t threshold) {
  const uint32_t lo = static_cast<uint32_t>(row_key), hi = static_cast<uint32_t>(row_key >> 32);
  return mix32(mix32(static_cast<uint32_t>(e) + lo) ^ hi) >= threshold;
}

// Elements whose hash is below the threshold are dropped: rate * 2^32,
// clamped to the 32-bit range. Host only (computed once per call).
inline uint32_t dropThreshold(float rate) {
  const double t = std::ldexp(static_cast<double>(rate), 32);
  if (t <= 0.0) return 0;
  if (t >= 4294967295.0) return 4294967295u;
  return static_cast<uint32_t>(t);
}

// The factor kept elements are multiplied by (inverted dropout).
inline float keptScale(float rate) { return 1.0f / (1.0f - rate); }

// v when keep, else +0.0f, by masking the bits: GCC does not turn a float
// select into a blend (under -ftrapping-math it treats it as control flow),
// and that alone would keep a CPU loop over it from vectorising. Host only.
inline float keptOrZero(float v, bool keep) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0u - static_cast<uint32_t>(keep);
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

}  // namespace dtrain::dropout_mask
