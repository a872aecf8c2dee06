// The Winograd kernels' per-call geometry and row-buffer sizes, shared by the
// 8-lane kernels (winograd_rows.h, winograd4x4_rows.h) and the 512-bit ones
// (cpu_kernels_avx512.h). Defines no function, so AVX-512 files may include it.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>

#include "core/backend/ops.h"

namespace dtrain::ops::winograd {

// F(2x2,3x3)'s split row (even or odd columns): entries [0, tilesW + 1)
// rounded up to vectors, plus two vectors of slack (the k+1 loads and the
// carry of the gradient accumulation).
constexpr int64_t kRowFloats = kWinogradMaxPaddedWidth / 2 + 32;

// One call's geometry: input and output extents, padding, tiles per column,
// per row and per sample.
struct Dims {
  int64_t h, w, ho, wo, p, q, th, tw, t;
  int64_t used;  // split-row entries any kernel touches
};

}  // namespace dtrain::ops::winograd

namespace dtrain::ops::winograd4 {

// F(4x4,3x3)'s phase of a split row: entries [0, tilesW + 1) rounded up to
// vectors, plus a vector of slack for the j+1 loads.
constexpr int64_t kPhaseFloats = kWinogradMaxPaddedWidth / 4 + 16;
// A split row: four phases.
constexpr int64_t kSplitFloats = 4 * kPhaseFloats;

// As F(2x2,3x3)'s, with `used` the phase entries any kernel touches (a multiple of 8).
using Dims = winograd::Dims;

}  // namespace dtrain::ops::winograd4
