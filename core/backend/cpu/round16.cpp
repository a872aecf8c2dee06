// Rounding to the 16-bit formats, kept in floats: the CPU's reference path of
// [job] precision "bf16" and "fp16" computes with the fp32 kernels on values
// rounded here, at the points where a 16-bit path stores them.
//
// Both round to nearest, ties to even, on the float's bits (adding half a
// unit of the dropped bits, less one, plus the lowest kept bit), so they do
// not depend on the compute threads' flush-to-zero setting; fp16's
// subnormals are whole multiples of 2^-24, rounded as such.
#include <cmath>
#include <cstring>

#include "core/backend/ops.h"

namespace dtrain::ops {

namespace {

inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;
constexpr uint32_t kQuietNan = 0x7fc00000u;

// bf16 keeps the float's exponent and its top 7 mantissa bits: the low 16
// bits go. A carry out of the mantissa raises the exponent (the largest
// values carry on to infinity, as they should).
inline float bf16Of(float x) {
  const uint32_t u = bitsOf(x);
  if ((u & kAbsMask) > kInfBits) return floatOf(u | kQuietNan);  // a NaN stays one (never rounds to inf)
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return floatOf(rounded & 0xffff0000u);
}

// fp16: 10 mantissa bits, exponents 2^-14 .. 2^15; below 2^-14 the
// subnormals, a fixed step of 2^-24; above 65504, infinity.
constexpr uint32_t kFp16MinNormalBits = 0x38800000u;  // 2^-14 as a float
constexpr float kFp16Max = 65504.0f;
constexpr float kFp16SubnormalStep = 5.9604644775390625e-8f;  // 2^-24

inline float fp16Of(float x) {
  const uint32_t u = bitsOf(x);
  const uint32_t a = u & kAbsMask;
  if (a > kInfBits) return floatOf(u | kQuietNan);
  if (a < kFp16MinNormalBits) {
    // Multiples of 2^-24: x * 2^24 is exact, and nearbyint rounds it to
    // even; the result is a float normal again (2^-24 is).
    return std::nearbyint(x * (1.0f / kFp16SubnormalStep)) * kFp16SubnormalStep;
  }
  const uint32_t rounded = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
  const float r = floatOf(rounded);
  if (std::fabs(r) > kFp16Max) return std::copysign(INFINITY, x);
  return r;
}

// The bits of an fp16 value from a float that is one already (fp16Of's).
inline uint16_t fp16BitsOf(float r) {
  const uint32_t u = bitsOf(r);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & kAbsMask;
  if (a > kInfBits) return sign | 0x7e00u;
  if (a == kInfBits) return sign | 0x7c00u;
  if (a < kFp16MinNormalBits)  // a subnormal: a whole number of 2^-24 steps, below 1024
    return sign | static_cast<uint16_t>(std::fabs(r) * (1.0f / kFp16SubnormalStep));
  const uint32_t exponent = (a >> 23) - 127 + 15;  // 1 .. 30
  return sign | static_cast<uint16_t>((exponent << 10) | ((a >> 13) & 0x3ffu));
}

inline float floatOfFp16Bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * kFp16SubnormalStep;
    return floatOf(bitsOf(magnitude) | sign);
  }
  if (exponent == 31) return floatOf(sign | kInfBits | (mantissa << 13));
  return floatOf(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

}  // namespace

void encode16Bits(HalfFormat format, const float* x, uint16_t* bits, int64_t n) {
  if (format == HalfFormat::Bf16) {
    for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(bitsOf(bf16Of(x[i])) >> 16);
  } else {
    for (int64_t i = 0; i < n; ++i) bits[i] = fp16BitsOf(fp16Of(x[i]));
  }
}

void decode16Bits(HalfFormat format, const uint16_t* bits, float* x, int64_t n) {
  if (format == HalfFormat::Bf16) {
    for (int64_t i = 0; i < n; ++i) x[i] = floatOf(static_cast<uint32_t>(bits[i]) << 16);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = floatOfFp16Bits(bits[i]);
  }
}

void roundTo16Bits(HalfFormat format, const float* x, float* y, int64_t n) {
  if (format == HalfFormat::Bf16) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16Of(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16Of(x[i]);
  }
}

}  // namespace dtrain::ops
