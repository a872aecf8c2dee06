// The random numbers behind everything seeded: weight initialisation, sample
// order, synthetic data, dropout. Fully specified here (splitmix64, rejection
// sampling for bounded integers, Box-Muller) instead of <random> distributions,
// whose output differs between standard libraries: a seed must give the same
// numbers on every machine, or resumed and multi-rank runs diverge.
// Ownership: plain values. Thread-safety: one Rng per thread.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

namespace dtrain {

// splitmix64 (Steele, Lea, Flood 2014) as a hash of one 64-bit value.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a, for deriving seeds from names.
inline uint64_t hashString(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // The splitmix64 stream: one 64-bit output per call.
  uint64_t next() {
    uint64_t r = splitmix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return r;
  }

  // Uniform in [0, n) for n > 0, without modulo bias: outputs below 2^64 mod n
  // are rejected so every residue is equally likely.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniformDouble() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller; the second value is not kept, for simplicity).
  double normal() {
    double u1 = uniformDouble(), u2 = uniformDouble();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // A seed for an independent stream derived from (seed, tag), e.g. (job seed,
  // epoch): hashing both keeps nearby inputs from giving correlated streams.
  static uint64_t mix(uint64_t seed, uint64_t tag) {
    Rng a(seed);
    Rng b(a.next() ^ tag);
    return b.next();
  }

 private:
  uint64_t state_;
};

}  // namespace dtrain
