// A batch of n Fashion-MNIST-shaped samples (1x28x28 pixels in [0,1), labels
// in [0,10)) drawn from `rng`: the CPU and GPU training tests feed both
// devices the same draws. `pinned` puts the images in page-locked memory, as
// the loader does for a GPU run.
#pragma once
#include <cstdint>
#include <random>

#include "datasets/batch_loader.h"

namespace dtrain::testing {

inline Batch randomImageBatch(int64_t n, std::mt19937& rng, bool pinned = false) {
  Batch b;
  b.images = pinned ? Tensor::pinned(Shape{n, 1, 28, 28}) : Tensor::empty(Shape{n, 1, 28, 28});
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (int64_t i = 0; i < b.images.numel(); ++i) b.images.data()[i] = pixel(rng);
  std::uniform_int_distribution<int32_t> label(0, 9);
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(label(rng));
  b.size = b.global_size = n;
  return b;
}

}  // namespace dtrain::testing
