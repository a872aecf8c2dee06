#include "core/comm/shm_ordered_sum.h"

#include <algorithm>
#include <cstring>

namespace dtrain {

namespace {

// The output is walked in tiles that stay in L1 while every input is added
// in; each element still sees the inputs in order, so tiling changes nothing.
constexpr int64_t kTileBytes = 8192;

template <typename T>
void addTwo(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void addInto(T* __restrict out, const T* __restrict a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += a[i];
}

template <typename T>
void sumTiles(const T* const* inputs, int count, T* out, int64_t n) {
  if (count == 1) {
    std::memcpy(out, inputs[0], static_cast<size_t>(n) * sizeof(T));
    return;
  }
  constexpr int64_t tile = kTileBytes / int64_t(sizeof(T));
  for (int64_t start = 0; start < n; start += tile) {
    const int64_t len = std::min(tile, n - start);
    addTwo(out + start, inputs[0] + start, inputs[1] + start, len);
    for (int r = 2; r < count; ++r) addInto(out + start, inputs[r] + start, len);
  }
}

}  // namespace

void sumInOrder(const float* const* inputs, int count, float* out, int64_t n) {
  sumTiles(inputs, count, out, n);
}

void sumInOrder(const double* const* inputs, int count, double* out, int64_t n) {
  sumTiles(inputs, count, out, n);
}

}  // namespace dtrain
