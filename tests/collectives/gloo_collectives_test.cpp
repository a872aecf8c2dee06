// Every collective, exact values, for groups of 1..8 ranks and element counts
// {0, 1, odd, large}, once per all-reduce algorithm. Each rank is a thread
// with its own group over real TCP on 127.0.0.1.
#include <doctest/doctest.h>

#include <atomic>

#include "collective_value_checks.h"
#include "collectives_test_util.h"
#include "core/comm/in_memory_store.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Rank r gets a share proportional to r % 3, so every third rank gets
// nothing; the last rank takes the remainder.
std::vector<int64_t> unevenSplit(int64_t n, int size) {
  std::vector<int64_t> counts(size, 0);
  int64_t weights = 0;
  for (int r = 0; r < size; ++r) weights += r % 3;
  int64_t given = 0;
  for (int r = 0; r + 1 < size; ++r) {
    counts[r] = weights ? n * (r % 3) / weights : 0;
    given += counts[r];
  }
  counts[size - 1] = n - given;
  return counts;
}

// Gloo's reduce-scatter over even or uneven counts (see unevenSplit).
void checkReduceScatterSplit(ProcessGroup& group, int64_t n, bool even) {
  checkReduceScatter(
      group, even ? std::vector<int64_t>(group.size(), n / group.size()) : unevenSplit(n, group.size()));
}

// Every rank counts itself in before the barrier; none may leave it before
// all have counted.
void checkBarrier(ProcessGroup& group, std::atomic<int>& arrived, int round) {
  arrived++;
  group.barrier();
  CHECK(arrived.load() >= group.size() * round);
}

void checkEveryCollective(const std::string& algorithm) {
  for (int size = 1; size <= 8; ++size) {
    CAPTURE(size);
    std::vector<int64_t> counts = {0, 1, 1001};
    // Eight ranks as threads on a small machine: the large count only up to 4.
    if (size <= 4) counts.push_back((int64_t(1) << 20) + 3);
    InMemoryStore store;
    std::atomic<int> arrived{0};
    auto errors = runRanks(size, [&](int rank) {
      GlooProcessGroup group(store, rank, size, testOptions(algorithm));
      int round = 0;
      for (int64_t n : counts) {
        checkAllReduceFloat(group, n, 0);
        checkAllReduceDouble(group, n, 0);
        // From the last rank, and from rank 1 (not rank 0 whenever there is a choice).
        checkBroadcast(group, n, size - 1);
        if (size > 2) checkBroadcast(group, n, 1);
        checkAllGather(group, n);
        checkReduceScatterSplit(group, n, true);
        checkReduceScatterSplit(group, n, false);
        checkBarrier(group, arrived, ++round);
      }
    });
    checkNoErrors(errors);
  }
}

}  // namespace

TEST_CASE("gloo collectives are exact for 1..8 ranks: auto") { checkEveryCollective("auto"); }
TEST_CASE("gloo collectives are exact for 1..8 ranks: ring") { checkEveryCollective("ring"); }
TEST_CASE("gloo collectives are exact for 1..8 ranks: ring_chunked") { checkEveryCollective("ring_chunked"); }
TEST_CASE("gloo collectives are exact for 1..8 ranks: halving_doubling") {
  checkEveryCollective("halving_doubling");
}
TEST_CASE("gloo collectives are exact for 1..8 ranks: bcube") { checkEveryCollective("bcube"); }

TEST_CASE("gloo reduce-scatter: counts with zeros anywhere, and everything to one rank") {
  const int size = 5;
  const std::vector<std::vector<int64_t>> splits = {{3, 0, 5, 0, 1}, {0, 0, 0, 0, 7}, {7, 0, 0, 0, 0},
                                                    {0, 2, 0, 2, 0}, {1, 1, 1, 1, 1}, {0, 300001, 0, 0, 2}};
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    GlooProcessGroup group(store, rank, size, testOptions());
    for (const auto& counts : splits) {
      checkReduceScatter(group, counts);
      checkAllGatherInPlace(group, counts);
    }
  });
  checkNoErrors(errors);
}
