// Every collective, exact values, for groups of 1..8 ranks and element counts
// {0, 1, odd, large}, once per all-reduce algorithm. Each rank is a thread
// with its own group over real TCP on 127.0.0.1.
#include <doctest/doctest.h>

#include <atomic>
#include <numeric>

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

void checkAllReduceFloat(ProcessGroup& group, int64_t n) {
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = contribution(group.rank(), i, 0);
  group.allReduceSum(data.data(), n);
  CHECK_MESSAGE(
      firstMismatch(data.data(), n, [&](int64_t i) { return sumOverRanks(group.size(), i, 0); }) == "",
      "all-reduce float n=" << n << " rank " << group.rank());
}

void checkAllReduceDouble(ProcessGroup& group, int64_t n) {
  // Beyond float precision: a path that went through float would lose the low digits.
  auto value = [](int rank, int64_t i) { return 1e12 + 1e6 * rank + static_cast<double>(i % 4099); };
  std::vector<double> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = value(group.rank(), i);
  group.allReduceSum(data.data(), n);
  CHECK_MESSAGE(firstMismatch(data.data(), n,
                              [&](int64_t i) {
                                double sum = 0;
                                for (int r = 0; r < group.size(); ++r) sum += value(r, i);
                                return sum;
                              }) == "",
                "all-reduce double n=" << n << " rank " << group.rank());
}

void checkBroadcast(ProcessGroup& group, int64_t n) {
  const int root = group.size() - 1;  // not rank 0 whenever there is a choice
  std::vector<float> data(n, -1.0f);
  if (group.rank() == root)
    for (int64_t i = 0; i < n; ++i) data[i] = contribution(root, i, 1);
  group.broadcast(data.data(), n, root);
  CHECK_MESSAGE(firstMismatch(data.data(), n, [&](int64_t i) { return contribution(root, i, 1); }) == "",
                "broadcast n=" << n << " rank " << group.rank());

  const int byteRoot = group.size() > 1 ? 1 : 0;
  std::vector<uint8_t> bytes(n, 0);
  if (group.rank() == byteRoot)
    for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  group.broadcastBytes(bytes.data(), n, byteRoot);
  CHECK_MESSAGE(
      firstMismatch(bytes.data(), n, [](int64_t i) { return static_cast<uint8_t>(i * 7 + 3); }) == "",
      "broadcast bytes n=" << n << " rank " << group.rank());
}

void checkAllGather(ProcessGroup& group, int64_t n) {
  const int size = group.size();
  std::vector<float> in(n), out(n * size, -1.0f);
  for (int64_t i = 0; i < n; ++i) in[i] = contribution(group.rank(), i, 2);
  group.allGather(in.data(), n, out.data());
  auto expected = [&](int64_t j) { return contribution(static_cast<int>(j / n), j % n, 2); };
  CHECK_MESSAGE(firstMismatch(out.data(), n * size, expected) == "",
                "all-gather n=" << n << " rank " << group.rank());

  // In place: the rank's own input already sits at its place in the output.
  std::vector<float> inPlace(n * size, -1.0f);
  for (int64_t i = 0; i < n; ++i) inPlace[group.rank() * n + i] = contribution(group.rank(), i, 2);
  group.allGather(inPlace.data() + group.rank() * n, n, inPlace.data());
  CHECK_MESSAGE(firstMismatch(inPlace.data(), n * size, expected) == "",
                "in-place all-gather n=" << n << " rank " << group.rank());
}

void checkReduceScatter(ProcessGroup& group, int64_t n, bool even) {
  const std::vector<int64_t> counts =
      even ? std::vector<int64_t>(group.size(), n / group.size()) : unevenSplit(n, group.size());
  n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = contribution(group.rank(), i, 3);
  group.reduceScatterSum(data.data(), counts);
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + group.rank(), int64_t(0));
  CHECK_MESSAGE(firstMismatch(data.data() + offset, counts[group.rank()],
                              [&](int64_t i) { return sumOverRanks(group.size(), offset + i, 3); }) == "",
                "reduce-scatter n=" << n << (even ? " even" : " uneven") << " rank " << group.rank());
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
        checkAllReduceFloat(group, n);
        checkAllReduceDouble(group, n);
        checkBroadcast(group, n);
        checkAllGather(group, n);
        checkReduceScatter(group, n, true);
        checkReduceScatter(group, n, false);
        checkBarrier(group, arrived, ++round);
      }
    });
    for (int r = 0; r < size; ++r) CHECK_MESSAGE(errors[r] == "", "rank " << r << " of " << size);
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
      const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
      std::vector<float> data(n);
      for (int64_t i = 0; i < n; ++i) data[i] = contribution(rank, i, 4);
      group.reduceScatterSum(data.data(), counts);
      const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank, int64_t(0));
      CHECK_MESSAGE(firstMismatch(data.data() + offset, counts[rank],
                                  [&](int64_t i) { return sumOverRanks(size, offset + i, 4); }) == "",
                    "rank " << rank << " n " << n);
    }
  });
  for (int r = 0; r < size; ++r) CHECK_MESSAGE(errors[r] == "", "rank " << r);
}
