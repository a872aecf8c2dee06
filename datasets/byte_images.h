// ByteImages: the in-memory store shared by the file and synthetic datasets.
// Pixels stay uint8 (a quarter of the float size: Fashion-MNIST is 55 MB as
// bytes instead of 220 MB as floats) and are scaled to [0,1] floats only when
// a sample is copied into a batch.
// Ownership: owns its buffers. Thread-safety: const methods are safe to call
// concurrently once filled; filling is single-threaded.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor/shape.h"

namespace dtrain {

class ByteImages {
 public:
  ByteImages() = default;
  // Takes `pixels` (count * shape.numel() bytes, sample-major) and `labels`
  // (count entries). Throws Error when the sizes disagree.
  ByteImages(Shape sample_shape, std::vector<uint8_t> pixels, std::vector<int32_t> labels);

  int64_t size() const { return static_cast<int64_t>(labels_.size()); }
  const Shape& sampleShape() const { return shape_; }
  int32_t label(int64_t index) const { return labels_[static_cast<size_t>(index)]; }
  const std::vector<int32_t>& labels() const { return labels_; }
  // The largest label, or -1 when empty.
  int32_t maxLabel() const;

  // Writes sampleShape().numel() floats in [0,1] and returns the label.
  // Throws Error when index is outside [0, size()).
  int32_t get(int64_t index, float* out) const;

  // The bytes of every sample, one after another (sampleBytes() each): what
  // get() scales, for a GPU to scale itself (core/backend/byte_batch.h).
  const uint8_t* pixels() const { return pixels_.data(); }
  int64_t sampleBytes() const { return sample_bytes_; }

 private:
  Shape shape_;
  int64_t sample_bytes_ = 0;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};

}  // namespace dtrain
