// The all-reduce algorithm cache: re-reducing the same buffers, buffers that
// move differently on each rank, and more shapes than the cache keeps. Sums
// must be fresh and exact every time.
#include <doctest/doctest.h>

#include <list>

#include "collectives_test_util.h"
#include "core/comm/in_memory_store.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

void fill(std::vector<float>& data, int rank, int round) {
  for (size_t i = 0; i < data.size(); ++i) data[i] = contribution(rank, static_cast<int64_t>(i), round);
}

std::string mismatch(const std::vector<float>& data, int size, int round) {
  return firstMismatch(data.data(), static_cast<int64_t>(data.size()),
                       [&](int64_t i) { return sumOverRanks(size, i, round); });
}

// Below and above the size from which algorithms run in place (1 MiB).
constexpr int64_t kSmall = 1001;
constexpr int64_t kLarge = (int64_t(1) << 18) + 5;

}  // namespace

TEST_CASE("gloo cache: the same buckets all-reduced every step get fresh sums") {
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      GlooProcessGroup group(store, rank, size, testOptions());
      // Two buckets of each shape: one shape must serve different buffers.
      std::vector<std::vector<float>> buckets = {std::vector<float>(kSmall), std::vector<float>(kSmall),
                                                 std::vector<float>(kLarge), std::vector<float>(kLarge),
                                                 std::vector<float>(17)};
      for (int step = 0; step < 5; ++step)
        for (size_t b = 0; b < buckets.size(); ++b) {
          const int round = step * 10 + static_cast<int>(b);
          fill(buckets[b], rank, round);
          group.allReduceSum(buckets[b].data(), static_cast<int64_t>(buckets[b].size()));
          CHECK_MESSAGE(mismatch(buckets[b], size, round) == "", "step " << step << " bucket " << b);
        }
    });
    for (int r = 0; r < size; ++r) CHECK_MESSAGE(errors[r] == "", "rank " << r);
  }
}

TEST_CASE("gloo cache: ranks whose buffers move differently still agree") {
  // Rank 0 reduces a new vector every time (its address may or may not
  // repeat), rank 1 alternates between two, the others keep one: a cache hit
  // on one rank is a miss on another, and every sum must still be right.
  const int size = 4;
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    GlooProcessGroup group(store, rank, size, testOptions());
    std::vector<float> kept(kLarge), other(kLarge), keptSmall(kSmall), otherSmall(kSmall);
    std::list<std::vector<float>> fresh;  // kept alive so addresses do not simply repeat
    for (int round = 0; round < 6; ++round)
      for (int64_t n : {kLarge, kSmall}) {
        std::vector<float>* data = n == kLarge ? &kept : &keptSmall;
        if (rank == 0) {
          fresh.emplace_back(n);
          data = &fresh.back();
          if (fresh.size() > 3) fresh.pop_front();
        } else if (rank == 1 && round % 2) {
          data = n == kLarge ? &other : &otherSmall;
        }
        fill(*data, rank, round);
        group.allReduceSum(data->data(), n);
        CHECK_MESSAGE(mismatch(*data, size, round) == "", "round " << round << " n " << n);
      }
  });
  for (int r = 0; r < size; ++r) CHECK_MESSAGE(errors[r] == "", "rank " << r);
}

TEST_CASE("gloo cache: more shapes than the cache keeps, cycled, stay exact") {
  const int size = 3;
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    GlooProcessGroup group(store, rank, size, testOptions());
    for (int cycle = 0; cycle < 2; ++cycle)
      for (int shape = 0; shape < 40; ++shape) {
        std::vector<float> data(static_cast<size_t>(shape) * 13 + 1);
        fill(data, rank, cycle + shape);
        group.allReduceSum(data.data(), static_cast<int64_t>(data.size()));
        CHECK_MESSAGE(mismatch(data, size, cycle + shape) == "", "cycle " << cycle << " shape " << shape);
      }
  });
  for (int r = 0; r < size; ++r) CHECK_MESSAGE(errors[r] == "", "rank " << r);
}
