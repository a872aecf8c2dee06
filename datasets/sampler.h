// Sampler: which samples a rank visits in an epoch, and in what order.
// Every rank computes the same seeded permutation of the whole dataset from
// (seed, epoch) alone, so no communication is needed and a resumed run sees
// the same order. Rank r takes global positions r, r+world, r+2*world, ...:
// interleaving by sample means that with a per-rank batch of b, global batch k
// (positions k*b*world .. (k+1)*b*world-1) is exactly the union of every
// rank's batch k, whatever the world size. Ranks' shares differ by at most one
// sample when world does not divide the dataset size.
// Ownership: a small value. Thread-safety: immutable; const methods are safe
// from any thread. Nothing blocks.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

class Sampler {
 public:
  // Throws Error when dataset_size < 0, world < 1 or rank is outside [0, world).
  Sampler(int64_t dataset_size, uint64_t seed, bool shuffle, int rank = 0, int world = 1);

  // The dataset indices this rank visits in `epoch`, in visiting order: the
  // epoch's permutation (identity without shuffle) at positions rank,
  // rank+world, ... Each call computes the order afresh (O(dataset size)).
  std::vector<int64_t> epochOrder(int64_t epoch) const;

  // Samples this rank visits per epoch (= epochOrder(e).size()).
  int64_t size() const;
  int64_t datasetSize() const { return dataset_size_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  bool shuffle() const { return shuffle_; }

 private:
  int64_t dataset_size_;
  uint64_t seed_;
  bool shuffle_;
  int rank_;
  int world_;
};

}  // namespace dtrain
