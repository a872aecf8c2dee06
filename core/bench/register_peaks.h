// Register-resident arithmetic loops: the most one core's vector units retire
// at each level, with no memory traffic. Each returns the floating-point
// operations done (an FMA lane counts 2, a bf16 pair dot product's lane 4) in
// `iterations` rounds; the caller times it. The AVX-512 ones run only where
// cpu::activeLevel() allows them; like every function compiled for a level
// above the baseline, they live in a namespace named after it. Internal to core/bench.
#pragma once
#include <cstdint>

namespace dtrain::bench {

double fmaLoop256(int64_t iterations);

namespace avx512 {
double fmaLoop512(int64_t iterations);  // register_peaks_avx512.cpp
}
namespace avx512_bf16 {
double dotBf16Loop512(int64_t iterations);  // register_peaks_avx512bf16.cpp
}

}  // namespace dtrain::bench
