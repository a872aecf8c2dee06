// SyntheticDataset: generated, seeded, learnable image data for benchmarks and
// tests that must not depend on files. Each class has a prototype image made
// of a few smooth random blobs per channel; a sample is its class prototype,
// shifted by a pixel or two, scaled in contrast and overlaid with noise.
// Prototypes derive from the seed alone, the samples from the seed and the
// split, so the train and test splits differ but share their classes and a
// model trained on one generalises to the other. The same seed gives the same
// bytes on every machine (the generator is fully specified, see core/util/rng.h).
// Ownership: owns its bytes. Thread-safety: immutable after construction;
// get() is safe from any thread. The constructor blocks while generating.
#pragma once
#include <cstdint>

#include "datasets/byte_images.h"
#include "datasets/dataset.h"

namespace dtrain {

class SyntheticDataset : public Dataset {
 public:
  // Uses data.shape ([C,H,W]), data.classes and data.train_samples or
  // data.test_samples. Throws ConfigError when they are out of range.
  SyntheticDataset(const DataSection& data, Split split, uint64_t seed);

  std::string describe() const override;
  int64_t size() const override { return images_.size(); }
  Shape sampleShape() const override { return images_.sampleShape(); }
  int64_t classes() const override { return classes_; }
  int32_t get(int64_t index, float* out) const override { return images_.get(index, out); }
  const ByteImages* byteImages() const override { return &images_; }

 private:
  Split split_;
  int64_t classes_ = 0;
  ByteImages images_;
};

}  // namespace dtrain
