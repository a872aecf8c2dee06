// Rounding to bf16 and fp16 (ops::roundTo16Bits) against references computed
// another way: bf16 by choosing the nearer of a float's two bf16 neighbours
// in double, fp16 by the compiler's own conversion to _Float16.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/backend/ops.h"

namespace dtrain {
namespace {

float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The bf16 neighbours below and above |x| in magnitude; the nearer wins, a
// tie goes to the one whose last kept bit is 0.
float referenceBf16(float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const uint32_t u = bitsOf(x);
  const uint32_t down = u & 0xffff0000u;  // toward zero: magnitudes, whatever the sign
  const uint32_t up = down + 0x10000u;  // may carry into the exponent, up to infinity
  const double dd = std::fabs(static_cast<double>(x) - floatOf(down));
  // Past the largest bf16 the next value up is 2^128 (then infinity).
  const double up_value =
      (up & 0x7fffffffu) == 0x7f800000u ? std::copysign(std::ldexp(1.0, 128), x) : static_cast<double>(floatOf(up));
  const double du = std::fabs(up_value - x);
  if (dd < du) return floatOf(down);
  if (du < dd) return floatOf(up);
  return ((down >> 16) & 1u) ? floatOf(up) : floatOf(down);
}

float referenceFp16(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

float rounded(ops::HalfFormat f, float x) {
  float y;
  ops::roundTo16Bits(f, &x, &y, 1);
  return y;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bitsOf(a) == bitsOf(b); }

std::vector<float> randomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> v;
  for (size_t i = 0; i < n; ++i) {
    // Any bit pattern (every exponent, NaNs and infinities included) ...
    v.push_back(floatOf(static_cast<uint32_t>(gen())));
    // ... and values in fp16's range, where its rounding is interesting.
    v.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(gen),
                           std::uniform_int_distribution<int>(-27, 17)(gen)));
  }
  return v;
}

// Rounds every value of `xs` to `format` at once and compares each with
// `reference`; reports the first few that differ; returns how many did.
int mismatches(ops::HalfFormat format, const std::vector<float>& xs, float (*reference)(float)) {
  std::vector<float> ys(xs.size());
  ops::roundTo16Bits(format, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  int wrong = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!same(ys[i], reference(xs[i])) && ++wrong <= 5)
      FAIL_CHECK("rounded(", xs[i], ") = ", ys[i], ", expected ", reference(xs[i]));
  return wrong;
}

TEST_CASE("bf16 rounding is to nearest, ties to even, over every kind of float") {
  std::vector<float> xs = randomFloats(200000, 3);
  // Exact ties both ways, the largest finite bf16 and what rounds past it.
  for (float x : {floatOf(0x3f808000u), floatOf(0x3f818000u), floatOf(0x7f7f0000u), floatOf(0x7f7f7fffu),
                  floatOf(0x7f7f8000u), 0.0f, -0.0f, std::numeric_limits<float>::infinity()})
    xs.push_back(x);
  CHECK(mismatches(ops::HalfFormat::Bf16, xs, referenceBf16) == 0);
  CHECK(rounded(ops::HalfFormat::Bf16, floatOf(0x3f808000u)) == 1.0f);  // tie to even: down
  CHECK(bitsOf(rounded(ops::HalfFormat::Bf16, floatOf(0x3f818000u))) == 0x3f820000u);  // tie to even: up
  CHECK(std::isinf(rounded(ops::HalfFormat::Bf16, floatOf(0x7f7f8000u))));  // past the largest: inf
  // A NaN whose payload sits in the dropped bits must not round to infinity.
  CHECK(std::isnan(rounded(ops::HalfFormat::Bf16, floatOf(0x7f800001u))));
}

TEST_CASE("fp16 rounding matches the compiler's conversion, subnormals and overflow included") {
  std::vector<float> xs = randomFloats(200000, 5);
  for (float x : {65504.0f, 65519.996f, 65520.0f, -65520.0f, 6.1035156e-5f /* 2^-14 */, 5.9604645e-8f /* 2^-24 */,
                  2.9802322e-8f /* 2^-25: a tie, to 0 */, 8.940697e-8f /* 3 * 2^-25: a tie, to 2^-23 */,
                  1.0f + 1.0f / 2048, 0.0f, -0.0f})
    xs.push_back(x);
  CHECK(mismatches(ops::HalfFormat::Fp16, xs, referenceFp16) == 0);
  CHECK(rounded(ops::HalfFormat::Fp16, 65519.996f) == 65504.0f);
  CHECK(std::isinf(rounded(ops::HalfFormat::Fp16, 65520.0f)));
  CHECK(rounded(ops::HalfFormat::Fp16, 2.9802322e-8f) == 0.0f);
  CHECK(rounded(ops::HalfFormat::Fp16, 1.0f + 1.0f / 2048) == 1.0f);  // tie to even
  CHECK(std::isnan(rounded(ops::HalfFormat::Fp16, floatOf(0x7f800001u))));
}

TEST_CASE("rounding in place equals rounding into another buffer, and is idempotent") {
  for (ops::HalfFormat f : {ops::HalfFormat::Bf16, ops::HalfFormat::Fp16}) {
    std::vector<float> xs = randomFloats(4096, 7), copy(xs.size()), again(xs.size());
    ops::roundTo16Bits(f, xs.data(), copy.data(), static_cast<int64_t>(xs.size()));
    ops::roundTo16Bits(f, xs.data(), xs.data(), static_cast<int64_t>(xs.size()));
    ops::roundTo16Bits(f, xs.data(), again.data(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      REQUIRE(same(xs[i], copy[i]));
      REQUIRE(same(again[i], xs[i]));
    }
  }
}

TEST_CASE("the 16-bit encodings hold the rounded values: decode(encode(x)) is the rounding, fp16 by the compiler's bits") {
  for (ops::HalfFormat f : {ops::HalfFormat::Bf16, ops::HalfFormat::Fp16}) {
    std::vector<float> xs = randomFloats(100000, 11);
    const auto n = static_cast<int64_t>(xs.size());
    std::vector<uint16_t> bits(xs.size());
    std::vector<float> back(xs.size()), want(xs.size());
    ops::encode16Bits(f, xs.data(), bits.data(), n);
    ops::decode16Bits(f, bits.data(), back.data(), n);
    ops::roundTo16Bits(f, xs.data(), want.data(), n);
    int wrong = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      bool ok = same(back[i], want[i]);
      if (f == ops::HalfFormat::Fp16 && !std::isnan(xs[i])) {
        // The compiler's fp16 bits of the same value (NaN payloads aside).
        const _Float16 h = static_cast<_Float16>(xs[i]);
        uint16_t hb;
        std::memcpy(&hb, &h, sizeof hb);
        ok = ok && hb == bits[i];
      }
      if (!ok && ++wrong <= 5) FAIL_CHECK("encoding of ", xs[i], ": bits ", bits[i], ", decoded ", back[i]);
    }
    CHECK(wrong == 0);
  }
}

}  // namespace
}  // namespace dtrain
