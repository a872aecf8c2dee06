#include "strategies/sharded/shard_plan.h"

#include <algorithm>

#include "core/errors.h"

namespace dtrain {

ShardPlan::ShardPlan(int64_t n, int ranks, int64_t align) {
  if (ranks < 1 || n < 0 || align < 1) throw Error("shard plan: needs ranks >= 1, n >= 0 and align >= 1");
  // Equal shares rounded up to the alignment; the last rank takes what is left.
  const int64_t share = ((n + ranks - 1) / ranks + align - 1) / align * align;
  bounds_.assign(static_cast<size_t>(ranks) + 1, 0);
  for (int r = 1; r <= ranks; ++r) bounds_[static_cast<size_t>(r)] = std::min(n, share * r);
  bounds_.back() = n;
}

std::vector<int64_t> ShardPlan::countsWithin(int64_t begin, int64_t end) const {
  std::vector<int64_t> counts(static_cast<size_t>(ranks()), 0);
  for (int r = 0; r < ranks(); ++r)
    counts[static_cast<size_t>(r)] =
        std::max<int64_t>(0, std::min(end, this->end(r)) - std::max(begin, this->begin(r)));
  return counts;
}

}  // namespace dtrain
