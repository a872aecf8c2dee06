#include "datasets/augmentation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

namespace {

// Stream tags: distinct constants so no two draws share a random stream.
constexpr uint64_t kAugmentTag = 0x6175676d656e7431ULL;
constexpr uint64_t kResizedCropTag = 0x7263726f70000001ULL;
constexpr uint64_t kPaddedCropTag = 0x7063726f70000002ULL;
constexpr uint64_t kFlipTag = 0x666c697000000003ULL;

// Attempts at a window inside the image before the centre-crop fallback (torchvision's 10).
constexpr int kResizedCropTries = 10;

std::string range(double lo, double hi) {
  char text[64];
  std::snprintf(text, sizeof text, "[%g, %g]", lo, hi);
  return text;
}

// A per-thread buffer of at least n floats, kept between calls so a sample
// costs no allocation.
float* scratch(int64_t n) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

}  // namespace

Augmentation::Augmentation(const AugmentationOptions& options) : o_(options) {
  if (o_.crop_padding < 0 || o_.crop_padding > 1024)
    throw ConfigError("[data] augment_crop_padding must be in [0, 1024], got " +
                      std::to_string(o_.crop_padding));
  if (!(o_.scale_min > 0 && o_.scale_min <= o_.scale_max && o_.scale_max <= 1))
    throw ConfigError("[data] augment_scale must be [min, max] with 0 < min <= max <= 1, got " +
                      range(o_.scale_min, o_.scale_max));
  if (!(o_.ratio_min > 0 && o_.ratio_min <= o_.ratio_max && std::isfinite(o_.ratio_max)))
    throw ConfigError("[data] augment_ratio must be [min, max] with 0 < min <= max, got " +
                      range(o_.ratio_min, o_.ratio_max));
}

Augmentation Augmentation::fromConfig(const DataSection& data) {
  AugmentationOptions o;
  o.flip = data.augment_flip;
  o.crop_padding = data.augment_crop_padding;
  o.resized_crop = data.augment_resized_crop;
  if (o.resized_crop) {
    if (data.augment_scale.size() != 2)
      throw ConfigError("[data] augment_scale must be [min, max], got " +
                        std::to_string(data.augment_scale.size()) + " values");
    if (data.augment_ratio.size() != 2)
      throw ConfigError("[data] augment_ratio must be [min, max], got " +
                        std::to_string(data.augment_ratio.size()) + " values");
    o.scale_min = data.augment_scale[0];
    o.scale_max = data.augment_scale[1];
    o.ratio_min = data.augment_ratio[0];
    o.ratio_max = data.augment_ratio[1];
  }
  return Augmentation(o);
}

uint64_t Augmentation::sampleDraw(uint64_t seed, int64_t epoch, int64_t index) {
  return Rng::mix(Rng::mix(Rng::mix(seed, kAugmentTag), static_cast<uint64_t>(epoch)),
                  static_cast<uint64_t>(index));
}

CropWindow Augmentation::resizedCropWindow(uint64_t draw, int64_t height, int64_t width) const {
  if (!o_.resized_crop || height < 1 || width < 1) return {0, 0, height, width};
  Rng rng(Rng::mix(draw, kResizedCropTag));
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(o_.ratio_min), log_hi = std::log(o_.ratio_max);
  for (int attempt = 0; attempt < kResizedCropTries; ++attempt) {
    const double target = area * (o_.scale_min + (o_.scale_max - o_.scale_min) * rng.uniformDouble());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniformDouble());
    const int64_t w = std::llround(std::sqrt(target * aspect));
    const int64_t h = std::llround(std::sqrt(target / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int64_t top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const int64_t left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  // The centre crop of the largest window whose aspect is within the range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t h = height, w = width;
  if (in_ratio < o_.ratio_min) {
    h = std::clamp<int64_t>(std::llround(static_cast<double>(w) / o_.ratio_min), 1, height);
  } else if (in_ratio > o_.ratio_max) {
    w = std::clamp<int64_t>(std::llround(static_cast<double>(h) * o_.ratio_max), 1, width);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::pair<int64_t, int64_t> Augmentation::paddedCropOffset(uint64_t draw) const {
  if (o_.crop_padding <= 0) return {0, 0};
  Rng rng(Rng::mix(draw, kPaddedCropTag));
  const uint64_t choices = static_cast<uint64_t>(2 * o_.crop_padding + 1);
  const int64_t dy = static_cast<int64_t>(rng.below(choices));
  const int64_t dx = static_cast<int64_t>(rng.below(choices));
  return {dy, dx};
}

bool Augmentation::flips(uint64_t draw) const {
  if (!o_.flip) return false;
  Rng rng(Rng::mix(draw, kFlipTag));
  return (rng.next() >> 63) != 0;
}

void Augmentation::apply(float* sample, const Shape& chw, uint64_t draw) const {
  const int64_t C = chw[0], H = chw[1], W = chw[2];
  const CropWindow window = resizedCropWindow(draw, H, W);
  if (!(window == CropWindow{0, 0, H, W})) {
    float* copy = scratch(C * H * W);
    std::copy(sample, sample + C * H * W, copy);
    cropResizeBilinear(copy, C, H, W, window, sample, H, W);
  }
  applyAfterResizedCrop(sample, chw, draw);
}

void Augmentation::applyAfterResizedCrop(float* sample, const Shape& chw, uint64_t draw) const {
  const int64_t C = chw[0], H = chw[1], W = chw[2];
  if (o_.crop_padding > 0) {
    const auto [dy, dx] = paddedCropOffset(draw);
    if (dy != o_.crop_padding || dx != o_.crop_padding) {
      float* copy = scratch(C * H * W);
      std::copy(sample, sample + C * H * W, copy);
      translateWithZeros(copy, sample, C, H, W, o_.crop_padding - dy, o_.crop_padding - dx);
    }
  }
  if (flips(draw)) flipHorizontal(sample, C, H, W);
}

}  // namespace dtrain
