// The shared-memory group's collectives: exact values for 2, 3 and 4 ranks
// (threads over one InMemoryStore), element counts around the chunk size
// (4096-byte slots), bitwise agreement between ranks, and calls of changing
// sizes and kinds back to back, where a rank that raced ahead and overwrote
// a slot or result part still being read would show as a wrong sum.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "collective_value_checks.h"
#include "collectives_test_util.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"
#include "shm_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;
using namespace std::chrono_literals;

TEST_CASE("shm all-reduce: exact sums on 2, 3 and 4 ranks for counts around the chunk size") {
  for (int size = 2; size <= 4; ++size) {
    CAPTURE(size);
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      ShmProcessGroup group(store, rank, size, shmTestOptions());
      int round = 0;
      // 1024 floats or 512 doubles fill one 4096-byte slot.
      for (int64_t n : {0, 1, 7, 1023, 1024, 1025, 2049, 5000}) checkAllReduceFloat(group, n, round++);
      for (int64_t n : {0, 1, 7, 511, 512, 513, 1500}) checkAllReduceDouble(group, n, round++);
    });
    checkNoErrors(errors);
  }
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm all-reduce: every rank gets bitwise the sum taken in rank order") {
  // Values whose float sums round: a rank that summed in another order, or
  // gave out its own partial sums, would differ in the last bits.
  auto value = [](int rank, int64_t i) {
    return 0.1f * float(i + 1) * float(rank + 1) + 1e-3f * float(rank);
  };
  for (int size : {3, 4}) {
    CAPTURE(size);
    const int64_t n = 3000;  // three chunks
    std::vector<float> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      float sum = value(0, i);
      for (int r = 1; r < size; ++r) sum = sum + value(r, i);
      expected[i] = sum;
    }
    std::vector<std::vector<float>> results(size);
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      ShmProcessGroup group(store, rank, size, shmTestOptions());
      std::vector<float> data(n);
      for (int64_t i = 0; i < n; ++i) data[i] = value(rank, i);
      group.allReduceSum(data.data(), n);
      results[rank] = data;
    });
    checkNoErrors(errors);
    for (int r = 0; r < size; ++r) {
      REQUIRE(results[r].size() == size_t(n));
      CHECK_MESSAGE(std::memcmp(results[r].data(), expected.data(), n * sizeof(float)) == 0, "rank " << r);
    }
  }
}

TEST_CASE("shm collectives: calls of changing sizes and kinds back to back stay exact") {
  const std::vector<int64_t> sizes = {1025, 3, 4100, 0, 1, 2500, 1024, 2049};
  // 2 ranks, and more ranks than the machine may have cores (threads are
  // then preempted mid-phase, which is when a missing wait shows).
  for (int size : {2, 4}) {
    CAPTURE(size);
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      ShmProcessGroup group(store, rank, size, shmTestOptions());
      for (int round = 0; round < 160; ++round) {
        // Uneven pacing: now one rank, now another is the last to arrive.
        if ((round + rank) % 5 == 0) std::this_thread::sleep_for(200us);
        const int64_t n = sizes[round % sizes.size()];
        if (round % 3 == 1)
          checkAllReduceDouble(group, n, round);
        else
          checkAllReduceFloat(group, n, round);
        if (round % 4 == 0) checkBroadcast(group, n, round % size);
        if (round % 6 == 0) checkAllGather(group, n);
        if (round % 8 == 0) group.barrier();
      }
    });
    checkNoErrors(errors);
  }
}

TEST_CASE("shm broadcast: from every root, floats and bytes, across chunks") {
  const int size = 3;
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    ShmProcessGroup group(store, rank, size, shmTestOptions());
    for (int root = 0; root < size; ++root)
      for (int64_t n : {0, 1, 1025, 3000, 2 * 4096 + 5}) checkBroadcast(group, n, root);
  });
  checkNoErrors(errors);
}

TEST_CASE("shm all-gather: every rank's part in rank order, across chunks and in place") {
  for (int size : {2, 4}) {
    CAPTURE(size);
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      ShmProcessGroup group(store, rank, size, shmTestOptions());
      for (int64_t n : {0, 1, 7, 1024, 1025, 2500}) checkAllGather(group, n);
    });
    checkNoErrors(errors);
  }
}

TEST_CASE("shm reduce-scatter: each rank's segment holds its sum, for even and uneven counts") {
  const int size = 4;
  const std::vector<std::vector<int64_t>> splits = {{1, 1, 1, 1}, {3, 0, 5, 1},         {0, 0, 0, 7},
                                                    {7, 0, 0, 0}, {600, 600, 600, 600}, {0, 3001, 0, 2},
                                                    {0, 0, 0, 0}};
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    ShmProcessGroup group(store, rank, size, shmTestOptions());
    for (const auto& counts : splits) {
      checkReduceScatter(group, counts);
      checkAllGatherInPlace(group, counts);
      checkAllGatherInPlace(group, counts);
    }
  });
  checkNoErrors(errors);
}

TEST_CASE("shm barrier: no rank leaves it before the last has arrived") {
  const int size = 3;
  InMemoryStore store;
  std::vector<double> waited(size, 0);
  std::atomic<int> arrived{0};
  std::vector<int> seenArrived(size, 0);
  auto errors = runRanks(size, [&](int rank) {
    ShmProcessGroup group(store, rank, size, shmTestOptions());
    group.barrier();  // all constructed: the clock starts together
    if (rank == 2) std::this_thread::sleep_for(200ms);
    auto start = std::chrono::steady_clock::now();
    arrived++;
    group.barrier();
    waited[rank] = secondsSince(start);
    seenArrived[rank] = arrived.load();
  });
  checkNoErrors(errors);
  for (int r = 0; r < size; ++r) {
    CAPTURE(r);
    CHECK(seenArrived[r] == size);
  }
  // Ranks 0 and 1 waited about as long as rank 2 slept; rank 2 came last and did not wait.
  CHECK(waited[0] >= 0.18);
  CHECK(waited[1] >= 0.18);
  CHECK(waited[0] < 2.0);
  CHECK(waited[2] < 0.1);
}

TEST_CASE("shm group: describe, ranks, and a group of one copies or does nothing") {
  InMemoryStore store;
  auto errors = runRanks(2, [&](int rank) {
    ShmProcessGroup group(store, rank, 2, shmTestOptions());
    CHECK(group.rank() == rank);
    CHECK(group.size() == 2);
    CHECK(group.describe() == "shared memory (2 ranks on this host)");
  });
  checkNoErrors(errors);

  InMemoryStore alone;
  ShmProcessGroup group(alone, 0, 1, shmTestOptions());
  CHECK(group.describe() == "shared memory (1 rank on this host)");
  CHECK_FALSE(alone.check("test/segment"));  // no segment for a group of one
  std::vector<float> f{1.5f, -2, 3};
  group.allReduceSum(f.data(), 3);
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  group.broadcast(f.data(), 3, 0);
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  std::vector<float> out(3, 0);
  group.allGather(f.data(), 3, out.data());
  CHECK(out == f);
  group.reduceScatterSum(f.data(), {3});
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  group.barrier();
  CHECK_THROWS_AS(group.broadcast(f.data(), 3, 1), CommError);
}

TEST_CASE("shm group: wrong arguments are refused in one line and leave the group usable") {
  InMemoryStore store;
  std::vector<std::vector<std::string>> messages(2);
  auto errors = runRanks(2, [&](int rank) {
    ShmProcessGroup group(store, rank, 2, shmTestOptions());
    std::vector<float> data(4, 1.0f);
    auto refused = [&](auto&& call) {
      try {
        call();
        messages[rank].push_back("(accepted)");
      } catch (const CommError& e) {
        messages[rank].push_back(e.what());
      }
    };
    refused([&] { group.allReduceSum(data.data(), -1); });
    refused([&] { group.broadcast(data.data(), 4, 2); });
    refused([&] { group.reduceScatterSum(data.data(), {4}); });
    refused([&] { group.allGather(data.data(), -3, data.data()); });
    group.allReduceSum(data.data(), 4);
    CHECK(data == std::vector<float>(4, 2.0f));
  });
  checkNoErrors(errors);
  for (int r = 0; r < 2; ++r) {
    REQUIRE(messages[r].size() == 4);
    CHECK(messages[r][0] == "all-reduce: element count -1 is negative");
    CHECK(messages[r][1] == "broadcast: root rank 2 is outside the group of 2 ranks");
    CHECK(messages[r][2] == "reduce-scatter: 1 counts given for a group of 2 ranks (one count per rank)");
    CHECK(messages[r][3] == "all-gather: element count -3 is negative");
  }

  InMemoryStore other;
  auto badOption = [&](int rank, int size, ShmOptions options) -> std::string {
    try {
      ShmProcessGroup group(other, rank, size, options);
    } catch (const CommError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  CHECK(badOption(0, 2, shmTestOptions(1s, 100)) ==
        "shm group (rank 0 of 2): slot_bytes 100 must be a positive multiple of 64, at most 1 TiB "
        "(the default is 4 MiB)");
  CHECK(badOption(0, 2, shmTestOptions(0ms)) ==
        "shm group (rank 0 of 2): the timeout must be positive (it is 0 ms)");
  CHECK(badOption(2, 2, shmTestOptions()) == "shm group (rank 2 of 2): the rank must be between 0 and 1");
  CHECK(badOption(0, 0, shmTestOptions()) == "shm group: size 0 must be at least 1");
  CHECK(leftoverSegments().empty());
}
