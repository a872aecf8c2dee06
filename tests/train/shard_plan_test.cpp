// ShardPlan: the flat layout cut into contiguous, equal, aligned ranges in
// rank order, and how much of a range each rank owns.
#include "strategies/sharded/shard_plan.h"

#include <doctest/doctest.h>

#include <vector>

using dtrain::ShardPlan;

TEST_CASE("shard plan: equal aligned shares in rank order, the last taking what is left") {
  const ShardPlan plan(1000, 3, 16);  // ceil(1000 / 3) = 334, aligned up to 336
  CHECK(plan.ranks() == 3);
  CHECK(plan.total() == 1000);
  CHECK(std::vector<int64_t>{plan.begin(0), plan.begin(1), plan.begin(2), plan.end(2)} ==
        std::vector<int64_t>{0, 336, 672, 1000});
  CHECK(plan.size(2) == 328);
  // 2 MiB pages of floats: a boundary on a page.
  const ShardPlan pages(10'000'000, 4, 524'288);
  for (int r = 1; r < 4; ++r) CHECK(pages.begin(r) % 524'288 == 0);
  CHECK(pages.end(3) == 10'000'000);
}

TEST_CASE("shard plan: a model smaller than the ranks' shares leaves the last ranks empty") {
  const ShardPlan plan(10, 4, 16);
  CHECK(plan.size(0) == 10);
  for (int r = 1; r < 4; ++r) CHECK(plan.size(r) == 0);
  CHECK(ShardPlan(0, 2, 16).size(1) == 0);
}

TEST_CASE("shard plan: the counts of a range are what each rank owns of it, in rank order") {
  const ShardPlan plan(1000, 3, 16);
  CHECK(plan.countsWithin(300, 700) == std::vector<int64_t>{36, 336, 28});
  CHECK(plan.countsWithin(0, 1000) == std::vector<int64_t>{336, 336, 328});
  CHECK(plan.countsWithin(400, 400) == std::vector<int64_t>{0, 0, 0});
}
