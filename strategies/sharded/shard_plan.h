// Which part of the flat parameter layout (core/optim/optimizer.h) each
// worker of a sharded run owns: contiguous ranges in rank order, equal in
// floats (so in bytes: every master value, gradient and optimizer moment is
// an fp32), each boundary on a multiple of `align` floats. A tensor that
// crosses a boundary is split there: whole tensors would let one large
// embedding or output matrix unbalance the shards.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

class ShardPlan {
 public:
  ShardPlan() = default;
  // [0, n) over `ranks` workers (ranks >= 1, n >= 0, align >= 1).
  ShardPlan(int64_t n, int ranks, int64_t align = 16);

  int ranks() const { return static_cast<int>(bounds_.size()) - 1; }
  int64_t total() const { return bounds_.back(); }
  int64_t begin(int rank) const { return bounds_[static_cast<size_t>(rank)]; }
  int64_t end(int rank) const { return bounds_[static_cast<size_t>(rank) + 1]; }
  int64_t size(int rank) const { return end(rank) - begin(rank); }
  // Per rank, how many floats of [begin, end) it owns, in rank order: the
  // counts of a reduce-scatter of that range.
  std::vector<int64_t> countsWithin(int64_t begin, int64_t end) const;
  // Calls part(b, e) for the parts of [begin, end) outside `rank`'s shard
  // (none, one or two, in order): what a worker hands back or clears of a
  // range once the shard owners have what they need of it.
  template <class Part>
  void forEachForeignPart(int rank, int64_t begin, int64_t end, Part&& part) const {
    const int64_t own_begin = std::max(begin, std::min(end, this->begin(rank)));
    const int64_t own_end = std::max(own_begin, std::min(end, this->end(rank)));
    if (own_begin > begin) part(begin, own_begin);
    if (end > own_end) part(own_end, end);
  }

 private:
  std::vector<int64_t> bounds_{0};  // rank r owns [bounds_[r], bounds_[r + 1])
};

}  // namespace dtrain
