// Augmentation: the training split's random transforms, applied per sample by
// the loader in torchvision's order: a random resized crop (RandomResizedCrop:
// an area fraction in `scale` and a log-uniform aspect ratio in `ratio`, ten
// tries, then a centre crop; resized back to the sample size), a random crop
// of the image padded by `crop_padding` zeros on each side (RandomCrop with
// padding), and a horizontal flip with probability 1/2.
//
// Randomness: everything a sample draws comes from one 64-bit value,
// sampleDraw(seed, epoch, index) (splitmix hashing, core/util/rng.h), each
// transform from its own stream of it. So the output does not depend on the
// loader's threads, the ranks, prefetching or where a run was resumed.
// Ownership: a small value. Thread-safety: immutable; const methods are safe
// from any thread (apply() uses a per-thread scratch buffer).
#pragma once
#include <cstdint>
#include <utility>

#include "core/config/job_config.h"
#include "core/tensor/shape.h"
#include "datasets/image_ops.h"

namespace dtrain {

struct AugmentationOptions {
  bool flip = false;
  int64_t crop_padding = 0;
  bool resized_crop = false;
  double scale_min = 0.08, scale_max = 1.0;        // resized crop: area fraction
  double ratio_min = 0.75, ratio_max = 4.0 / 3.0;  // resized crop: width / height
};

class Augmentation {
 public:
  Augmentation() = default;  // none: active() is false
  // Throws ConfigError naming the [data] key for values out of range.
  explicit Augmentation(const AugmentationOptions& options);
  // The [data] augment_* keys.
  static Augmentation fromConfig(const DataSection& data);

  // Whether any transform is on (the loader skips the draws otherwise).
  bool active() const { return o_.flip || o_.crop_padding > 0 || o_.resized_crop; }
  const AugmentationOptions& options() const { return o_; }

  // The value every draw of sample `index` in `epoch` derives from.
  static uint64_t sampleDraw(uint64_t seed, int64_t epoch, int64_t index);

  // The individual draws (what apply() does), for datasets that take the
  // resized crop themselves and for tests.
  // The window of a height x width image to resize: the whole image
  // without resized_crop.
  CropWindow resizedCropWindow(uint64_t draw, int64_t height, int64_t width) const;
  // The window's corner (dy, dx) in the padded image, each in [0, 2 *
  // crop_padding]: the content moves by (crop_padding - dy, crop_padding - dx).
  std::pair<int64_t, int64_t> paddedCropOffset(uint64_t draw) const;
  // Whether the sample is flipped (never without flip).
  bool flips(uint64_t draw) const;

  // All transforms, in place, on a [C,H,W] sample.
  void apply(float* sample, const Shape& chw, uint64_t draw) const;
  // The transforms after the resized crop (padded crop, flip), in place.
  void applyAfterResizedCrop(float* sample, const Shape& chw, uint64_t draw) const;

 private:
  AugmentationOptions o_;
};

}  // namespace dtrain
