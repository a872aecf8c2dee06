#include "core/comm/single_process_group.h"

#include <doctest/doctest.h>

#include <vector>

#include "core/errors.h"

using namespace dtrain;

TEST_CASE("single-process group: rank 0 of 1, and every collective keeps or copies the data") {
  SingleProcessGroup group;
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);
  CHECK(group.describe() == "single process");

  std::vector<float> f{1.5f, -2, 3};
  group.allReduceSum(f.data(), 3);
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  std::vector<double> d{1e12 + 1, 2};
  group.allReduceSum(d.data(), 2);
  CHECK(d == std::vector<double>{1e12 + 1, 2});
  group.broadcast(f.data(), 3, 0);
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  std::vector<uint8_t> b{7, 8};
  group.broadcastBytes(b.data(), 2, 0);
  CHECK(b == std::vector<uint8_t>{7, 8});

  std::vector<float> out(3, 0);
  group.allGather(f.data(), 3, out.data());
  CHECK(out == f);
  group.allGather(out.data(), 3, out.data());  // in place
  CHECK(out == f);

  group.reduceScatterSum(f.data(), {3});
  CHECK(f == std::vector<float>{1.5f, -2, 3});
  group.barrier();
  group.allReduceSum(f.data(), 0);
}

TEST_CASE("single-process group: arguments a real group would refuse are refused") {
  SingleProcessGroup group;
  std::vector<float> f(4);
  CHECK_THROWS_WITH_AS(group.broadcast(f.data(), 4, 1),
                       "broadcast: root rank 1 is outside the group (a single process has only rank 0)",
                       CommError);
  CHECK_THROWS_AS(group.broadcastBytes(nullptr, 0, -1), CommError);
  CHECK_THROWS_WITH_AS(group.reduceScatterSum(f.data(), {2, 2}),
                       "reduce-scatter: 2 counts given for a group of 1 rank (one count per rank)",
                       CommError);
  CHECK_THROWS_WITH_AS(group.allReduceSum(f.data(), -1), "all-reduce: element count -1 is negative",
                       CommError);
}
