#include "datasets/sampler.h"

#include <numeric>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

Sampler::Sampler(int64_t dataset_size, uint64_t seed, bool shuffle)
    : dataset_size_(dataset_size), seed_(seed), shuffle_(shuffle) {
  if (dataset_size < 0) throw Error("Sampler: dataset size " + std::to_string(dataset_size) + " is negative");
}

std::vector<int64_t> Sampler::epochOrder(int64_t epoch) const {
  std::vector<int64_t> perm(static_cast<size_t>(dataset_size_));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (shuffle_ && dataset_size_ > 1) {
    // Fisher-Yates with our own generator: the permutation must be identical
    // on every rank and every standard library (std::shuffle is not).
    Rng rng(Rng::mix(seed_, static_cast<uint64_t>(epoch)));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
  }
  return perm;
}

}  // namespace dtrain
