// Shared by the Winograd transform kernels (winograd_forward.cpp,
// winograd_backward.cpp): tile geometry, split padded rows and the store
// policy. Internal to core/backend/cpu.
//
// Vectorisation runs across the tiles of one tile row (8 tiles per vector).
// Padded rows are split into even and odd columns, E[j] = column 2j and
// O[j] = column 2j+1, so tile j's four columns are E[j], O[j], E[j+1], O[j+1].
// The "+1" neighbours come from lane shifts in registers, never from loads at
// odd offsets: a load that straddles a just-stored vector cannot be forwarded
// from the store buffer and stalls. Row buffers live on the stack, which bounds
// the padded width (kWinogradMaxPaddedWidth); wider inputs use im2col.
#pragma once
#include <cstdint>

#include "core/backend/cpu/vec8.h"
#include "core/backend/cpu/winograd_dims.h"
#include "core/backend/ops.h"

namespace dtrain::ops::winograd {

using simd::V8;

inline Dims dims(const Window2d& g) {
  const WinogradTiles tiles = winogradTiles(g);
  const int64_t tw = tiles.cols;
  return {g.height,   g.width, g.outHeight(),     g.outWidth(),         g.pad_h, g.pad_w,
          tiles.rows, tw,      tiles.perSample(), (tw + 7) / 8 * 8 + 16};
}

// Stores: partial stores are slow (a masked store is microcoded on AMD Zen; a
// scalar copy costs a few stores per vector), so the kernels store whole
// vectors and let the surplus lanes spill forward into memory that the same
// call overwrites later (the rest of the row, the next row or plane). Every
// kernel writes each destination region in increasing address order; only
// stores near the end of a region, where a spill would leave it, are partial.
// The kernels decide that once per chunk and pass the lane mask (`exact`,
// null when whole vectors may be stored).
// Loads likewise: whole vectors unless a mask is given (lanes past it read as zero).
inline V8 get(const float* p, const simd::Mask* mask) {
  return mask ? simd::loadMasked(p, *mask) : simd::load(p);
}

inline void put(float* p, V8 v, const simd::Mask* exact) {
  if (exact)
    simd::storeMasked(p, v, *exact);
  else
    simd::store(p, v);
}

// Splits an input row: ev[k] = row[2k], od[k] = row[2k+1], zero past w.
// Entries past the last vector written stay as they are (zero: buffers start
// zeroed and every split of the call writes the same entries).
inline void splitRow(const float* row, int64_t w, float* ev, float* od) {
  for (int64_t k = 0; 2 * k < w; k += 8) {
    V8 a, b;
    simd::deinterleave(simd::loadN(row + 2 * k, w - 2 * k), simd::loadN(row + 2 * k + 8, w - 2 * k - 8), a,
                       b);
    simd::store(ev + k, a);
    simd::store(od + k, b);
  }
}

// The padded columns 2j, 2j+1, 2j+2, 2j+3 of tiles j = jc..jc+7, from a split
// row and the left padding q (padded column X is input column X - q).
struct TileColumns {
  V8 d0, d1, d2, d3;
};
inline TileColumns tileColumns(const float* ev, const float* od, int64_t jc, int64_t q) {
  const V8 ev0 = simd::load(ev + jc), od0 = simd::load(od + jc);
  if (q == 0) {
    const V8 ev1 = simd::load(ev + jc + 8), od1 = simd::load(od + jc + 8);
    return {ev0, od0, simd::shiftDown(ev0, ev1), simd::shiftDown(od0, od1)};
  }
  if (q == 1) {  // column 2j is input 2j - 1 = od[j - 1]
    const V8 odm = jc ? simd::load(od + jc - 8) : simd::zero(), ev1 = simd::load(ev + jc + 8);
    return {simd::shiftUp(od0, odm), ev0, od0, simd::shiftDown(ev0, ev1)};
  }
  // q == 2: column 2j is input 2j - 2 = ev[j - 1]
  const V8 evm = jc ? simd::load(ev + jc - 8) : simd::zero(),
           odm = jc ? simd::load(od + jc - 8) : simd::zero();
  return {simd::shiftUp(ev0, evm), simd::shiftUp(od0, odm), ev0, od0};
}

// dx row (w floats) from padded-row accumulators: dx[ix] = padded[ix + q].
inline void emitRow(const float* e, const float* o, int64_t w, int64_t q, float* dx, const float* end) {
  const bool near_end = end - dx < w + 16;
  for (int64_t j = 0; 2 * j < w; j += 8) {
    const V8 e0 = simd::load(e + j), o0 = simd::load(o + j);
    V8 first = e0, second = o0;  // q == 0: (E[j], O[j])
    if (q == 1) {                // (O[j], E[j+1])
      first = o0;
      second = simd::shiftDown(e0, simd::load(e + j + 8));
    } else if (q == 2) {  // (E[j+1], O[j+1])
      first = simd::shiftDown(e0, simd::load(e + j + 8));
      second = simd::shiftDown(o0, simd::load(o + j + 8));
    }
    V8 lo, hi;
    simd::interleave(first, second, lo, hi);
    if (near_end) {
      simd::storeN(dx + 2 * j, lo, w - 2 * j);
      simd::storeN(dx + 2 * j + 8, hi, w - 2 * j - 8);
    } else {
      simd::store(dx + 2 * j, lo);
      if (2 * j + 8 < w) simd::store(dx + 2 * j + 8, hi);
    }
  }
}

}  // namespace dtrain::ops::winograd
