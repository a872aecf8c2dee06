#include "datasets/sampler.h"

#include <numeric>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

Sampler::Sampler(int64_t dataset_size, uint64_t seed, bool shuffle, int rank, int world)
    : dataset_size_(dataset_size), seed_(seed), shuffle_(shuffle), rank_(rank), world_(world) {
  if (dataset_size < 0) throw Error("Sampler: dataset size " + std::to_string(dataset_size) + " is negative");
  if (world < 1 || rank < 0 || rank >= world)
    throw Error("Sampler: rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world));
}

int64_t Sampler::size() const {
  return rank_ < dataset_size_ ? (dataset_size_ - rank_ + world_ - 1) / world_ : 0;
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
  if (world_ == 1) return perm;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(size()));
  for (int64_t p = rank_; p < dataset_size_; p += world_) mine.push_back(perm[static_cast<size_t>(p)]);
  return mine;
}

}  // namespace dtrain
