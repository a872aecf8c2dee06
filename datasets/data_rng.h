// DataRng: the random number generator behind sample order and synthetic data.
// It is fully specified here (splitmix64, rejection sampling for bounded
// integers) instead of using <random> distributions, whose output differs
// between standard libraries: a seed must give the same epoch order and the
// same synthetic data on every machine, or resumed and multi-rank runs diverge.
// Ownership: a plain value. Thread-safety: one instance per thread.
#pragma once
#include <cstdint>

namespace dtrain {

class DataRng {
 public:
  explicit DataRng(uint64_t seed) : state_(seed) {}

  // splitmix64 (Steele, Lea, Flood 2014): one 64-bit output per call.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
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

  // A seed for an independent stream derived from (seed, tag), e.g. (job seed,
  // epoch): hashing both keeps nearby inputs from giving correlated streams.
  static uint64_t mix(uint64_t seed, uint64_t tag) {
    DataRng a(seed);
    DataRng b(a.next() ^ tag);
    return b.next();
  }

 private:
  uint64_t state_;
};

}  // namespace dtrain
