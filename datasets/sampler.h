// Sampler: the order in which a run visits the dataset in an epoch. Every
// rank computes the same seeded permutation of the whole dataset from
// (seed, epoch) alone, so no communication is needed and a resumed run sees
// the same order. The order does not depend on the world size: BatchLoader
// cuts it into global batches and gives each rank its slice of every batch,
// so a run resumed on a different number of workers continues with the same
// batches.
// Ownership: a small value. Thread-safety: immutable; const methods are safe
// from any thread. Nothing blocks.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

class Sampler {
 public:
  // Throws Error when dataset_size < 0.
  Sampler(int64_t dataset_size, uint64_t seed, bool shuffle);

  // The dataset indices visited in `epoch`, in order: the epoch's permutation
  // (identity without shuffle). Each call computes it afresh (O(dataset size)).
  std::vector<int64_t> epochOrder(int64_t epoch) const;

  // Samples per epoch (= epochOrder(e).size()).
  int64_t size() const { return dataset_size_; }
  int64_t datasetSize() const { return dataset_size_; }
  bool shuffle() const { return shuffle_; }

 private:
  int64_t dataset_size_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace dtrain
