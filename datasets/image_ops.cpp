#include "datasets/image_ops.h"

#include <algorithm>
#include <vector>

namespace dtrain {

void flipHorizontal(float* sample, int64_t channels, int64_t height, int64_t width) {
  for (int64_t row = 0; row < channels * height; ++row) {
    float* r = sample + row * width;
    std::reverse(r, r + width);
  }
}

void translateWithZeros(const float* src, float* dst, int64_t channels, int64_t height, int64_t width,
                        int64_t shift_y, int64_t shift_x) {
  // The destination columns that read a source column: [x0, x1).
  const int64_t x0 = std::clamp<int64_t>(shift_x, 0, width);
  const int64_t x1 = std::clamp<int64_t>(width + shift_x, 0, width);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      float* out = dst + (c * height + y) * width;
      const int64_t sy = y - shift_y;
      if (sy < 0 || sy >= height || x0 >= x1) {
        std::fill(out, out + width, 0.0f);
        continue;
      }
      const float* in = src + (c * height + sy) * width;
      std::fill(out, out + x0, 0.0f);
      std::copy(in + (x0 - shift_x), in + (x1 - shift_x), out + x0);
      std::fill(out + x1, out + width, 0.0f);
    }
  }
}

namespace {

// Where output index i of `out` samples along an axis of the window
// [start, start+extent): the two source indices and the weight of the second.
struct Tap {
  int64_t lo, hi;
  float frac;
};

std::vector<Tap> taps(int64_t start, int64_t extent, int64_t out) {
  std::vector<Tap> t(static_cast<size_t>(out));
  const double scale = static_cast<double>(extent) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    // Pixel centres aligned: output centre i + 0.5 maps to (i + 0.5) * scale in the window.
    double s = (static_cast<double>(i) + 0.5) * scale - 0.5;
    s = std::clamp(s, 0.0, static_cast<double>(extent - 1));
    const int64_t lo = static_cast<int64_t>(s);
    const int64_t hi = std::min(lo + 1, extent - 1);
    t[static_cast<size_t>(i)] = {start + lo, start + hi, static_cast<float>(s - static_cast<double>(lo))};
  }
  return t;
}

}  // namespace

void cropResizeBilinear(const float* src, int64_t channels, int64_t src_height, int64_t src_width,
                        const CropWindow& window, float* dst, int64_t out_height, int64_t out_width) {
  const std::vector<Tap> ys = taps(window.top, window.height, out_height);
  const std::vector<Tap> xs = taps(window.left, window.width, out_width);
  for (int64_t c = 0; c < channels; ++c) {
    const float* plane = src + c * src_height * src_width;
    float* out = dst + c * out_height * out_width;
    for (int64_t y = 0; y < out_height; ++y) {
      const Tap& ty = ys[static_cast<size_t>(y)];
      const float* r0 = plane + ty.lo * src_width;
      const float* r1 = plane + ty.hi * src_width;
      for (int64_t x = 0; x < out_width; ++x) {
        const Tap& tx = xs[static_cast<size_t>(x)];
        const float top = r0[tx.lo] + (r0[tx.hi] - r0[tx.lo]) * tx.frac;
        const float bottom = r1[tx.lo] + (r1[tx.hi] - r1[tx.lo]) * tx.frac;
        out[y * out_width + x] = top + (bottom - top) * ty.frac;
      }
    }
  }
}

}  // namespace dtrain
