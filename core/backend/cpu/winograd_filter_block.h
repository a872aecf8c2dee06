// The Winograd filter-side transforms work on a block of one filter's
// channels at a time, channel innermost. Their transformed planes u[xi][F][C]
// lie filters x channels floats apart (16 KiB for 64 x 64): written or read
// one (filter, channel) at a time, the 16 or 36 planes share a few L1 sets
// and evict each other, which cost as much as a whole small convolution's
// products (a micro-batch of 16 in a pipeline stage). Channel-innermost loops
// touch each plane in runs of a block's channels and vectorise; the
// arithmetic per value is unchanged.
#pragma once
#include <algorithm>
#include <cstdint>

namespace dtrain::ops {

constexpr int64_t kFilterChannelBlock = 64;

// A block's 3x3 taps by tap: v[tap][channel], moved from and to the weight
// layout [F, C, 3, 3] (a channel's 9 taps side by side).
struct FilterTaps {
  float v[9][kFilterChannelBlock];

  void load(const float* w, int64_t channels) {
    for (int64_t c = 0; c < channels; ++c)
      for (int i = 0; i < 9; ++i) v[i][c] = w[c * 9 + i];
  }
  void addTo(float* w, int64_t channels) const {
    for (int64_t c = 0; c < channels; ++c)
      for (int i = 0; i < 9; ++i) w[c * 9 + i] += v[i][c];
  }
};

}  // namespace dtrain::ops
