// Pixel operations on one [C,H,W] float sample, the building blocks of the
// train-time augmentation: a horizontal flip, a translation that fills with
// zeros (a crop of a zero-padded image), and a bilinear crop-and-resize.
// Ownership: callers own every buffer. Thread-safety: pure functions.
#pragma once
#include <cstdint>

namespace dtrain {

// A rectangle of an image: rows [top, top+height), columns [left, left+width).
struct CropWindow {
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const CropWindow& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

// Mirrors every row of the C planes of H x W in place.
void flipHorizontal(float* sample, int64_t channels, int64_t height, int64_t width);

// dst[c][y][x] = src[c][y - shift_y][x - shift_x], 0 where that is outside
// the image: the content moves down by shift_y and right by shift_x. src and
// dst must not overlap.
void translateWithZeros(const float* src, float* dst, int64_t channels, int64_t height, int64_t width,
                        int64_t shift_y, int64_t shift_x);

// Resizes `window` of src (C planes of src_height x src_width) to C planes of
// out_height x out_width in dst, bilinearly with pixel centres aligned
// (PyTorch's align_corners=False) and samples clamped to the window, so no
// pixel outside it contributes. src and dst must not overlap.
void cropResizeBilinear(const float* src, int64_t channels, int64_t src_height, int64_t src_width,
                        const CropWindow& window, float* dst, int64_t out_height, int64_t out_width);

}  // namespace dtrain
