// A training batch that crosses to a GPU as image bytes (a quarter of the
// floats' size) and becomes the float batch there: each sample's bytes scaled
// to [0,1], moved by its padded crop, mirrored by its flip, then normalised
// per channel. One definition for the CUDA kernel (cuda/byte_batch_kernels.cu)
// and the CPU reference (byteBatchToFloats, which the tests compare with the
// loader's float batches), written in the order of the loader's float path
// (ByteImages::get, Augmentation::applyAfterResizedCrop, Normalisation::apply)
// with the same operations: a division by 255, a subtraction and a division by
// the std. Moving and mirroring copy values, so every float comes out as the
// same bits on both (nvcc divides to IEEE round-to-nearest unless told to use
// fast math, which the build does not).
// The resized crop is not here: a run with it keeps the float batches.
#pragma once
#include <cstdint>

#include "core/backend/host_device.h"

namespace dtrain {

// What crosses to the device for each sample besides its bytes: where they
// are and the sample's augmentation, drawn on the host from its (seed, epoch,
// index) draw as the float path draws it.
struct SampleTransform {
  // The sample's row in the batch's bytes; with the training split kept on
  // the device (BatchForm::Indices), its index in the dataset.
  int64_t source = 0;
  // The padded crop's move of the content: down by shift_y and right by
  // shift_x rows and columns (crop_padding minus the crop's corner), zeros
  // filling what it uncovers. 0 without a padded crop.
  int32_t shift_y = 0;
  int32_t shift_x = 0;
  int32_t flip = 0;  // 1: mirrored left to right, after the move
  int32_t unused = 0;
};

// The batch's image format: sample extents and, when normalised, one mean and
// std per channel (null: no normalisation).
struct ByteBatchLayout {
  int64_t channels = 0, height = 0, width = 0;
  const float* mean = nullptr;
  const float* std = nullptr;
  DTRAIN_HOST_DEVICE int64_t sampleBytes() const { return channels * height * width; }
};

// Pixel (c, y, x) of a sample whose bytes start at `src`, scaled, moved and
// mirrored (before normalisation). The flip is the last move on the float
// path, so its inverse comes first here.
DTRAIN_HOST_DEVICE inline float transformedPixel(const uint8_t* src, const ByteBatchLayout& layout,
                                                 const SampleTransform& t, int64_t c, int64_t y, int64_t x) {
  const int64_t unflipped = t.flip ? layout.width - 1 - x : x;
  const int64_t sy = y - t.shift_y, sx = unflipped - t.shift_x;
  if (sy < 0 || sy >= layout.height || sx < 0 || sx >= layout.width) return 0.0f;
  // A true division, as ByteImages::get: byte / 255 exactly rounded.
  return static_cast<float>(src[(c * layout.height + sy) * layout.width + sx]) / 255.0f;
}

// Output float `i` of the batch (sample-major [n,C,H,W]); `pixels` holds the
// sources' bytes, sample after sample.
DTRAIN_HOST_DEVICE inline float byteBatchValue(const uint8_t* pixels, const SampleTransform* transforms,
                                               const ByteBatchLayout& layout, int64_t i) {
  const int64_t plane = layout.height * layout.width;
  const int64_t sample = layout.channels * plane;
  const int64_t n = i / sample, r = i - n * sample;
  const int64_t c = r / plane, p = r - c * plane;
  const int64_t y = p / layout.width, x = p - y * layout.width;
  const SampleTransform& t = transforms[n];
  const float v = transformedPixel(pixels + t.source * sample, layout, t, c, y, x);
  // A true division, as Normalisation::apply (and torchvision's Normalize).
  return layout.mean ? (v - layout.mean[c]) / layout.std[c] : v;
}

// The CPU reference of the device's conversion: n samples into `out`.
inline void byteBatchToFloats(const uint8_t* pixels, const SampleTransform* transforms, int64_t n,
                              const ByteBatchLayout& layout, float* out) {
  const int64_t total = n * layout.sampleBytes();
  for (int64_t i = 0; i < total; ++i) out[i] = byteBatchValue(pixels, transforms, layout, i);
}

}  // namespace dtrain
