// A dataset of seeded random bytes (0 and 255 included), like
// Fashion-MNIST's or CIFAR's: the byte-batch tests' data on either device.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/util/rng.h"
#include "datasets/byte_images.h"
#include "datasets/dataset.h"

namespace dtrain::testing {

class BytesDataset : public Dataset {
 public:
  BytesDataset(int64_t n, const Shape& shape, uint64_t seed) : images_(make(n, shape, seed)) {}
  std::string describe() const override { return "bytes"; }
  int64_t size() const override { return images_.size(); }
  Shape sampleShape() const override { return images_.sampleShape(); }
  int64_t classes() const override { return 10; }
  int32_t get(int64_t index, float* out) const override { return images_.get(index, out); }
  const ByteImages* byteImages() const override { return &images_; }

 private:
  static ByteImages make(int64_t n, const Shape& shape, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint8_t> pixels(static_cast<size_t>(n * shape.numel()));
    for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng.next() >> 56);
    pixels[0] = 0;
    pixels[1] = 255;
    std::vector<int32_t> labels(static_cast<size_t>(n));
    for (int32_t& l : labels) l = static_cast<int32_t>(rng.below(10));
    return ByteImages(shape, std::move(pixels), std::move(labels));
  }
  ByteImages images_;
};

}  // namespace dtrain::testing
