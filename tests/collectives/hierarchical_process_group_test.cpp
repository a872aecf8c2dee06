// The hierarchical group (shared memory inside each host, Gloo between one
// leader per host): exact values of every collective for several layouts of
// ranks over hosts (threads as ranks, "hosts" as node numbers), the same bits
// on every rank, a layout that is not host by host refused, and a failure
// inside a host or between the leaders named by the step where it happened.
#include "core/comm/hierarchical_process_group.h"

#include <doctest/doctest.h>

#include <cstring>

#include "collective_value_checks.h"
#include "collectives_test_util.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"
#include "shm_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

HierarchyOptions layout(const std::vector<int>& node_of_rank) {
  HierarchyOptions o;
  o.node_of_rank = node_of_rank;
  for (int node : node_of_rank) o.rank_hosts.push_back("10.0.0." + std::to_string(node + 1));
  o.timeout = std::chrono::seconds(20);
  o.shm_slot_bytes = 4096;  // 1024 floats a chunk: the counts below take several
  return o;
}

}  // namespace

TEST_CASE("hierarchical group: every collective's exact values, for ranks laid over hosts in several ways") {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{
           {0, 0, 1, 1}, {0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1}, {0, 0}, {0, 0, 1, 1, 2}, {0, 1, 2}}) {
    const int size = static_cast<int>(nodes.size());
    CAPTURE(size);
    CAPTURE(nodes[1]);
    CAPTURE(nodes.back());
    InMemoryStore store;
    auto errors = runRanks(size, [&](int rank) {
      HierarchicalProcessGroup group(store, rank, layout(nodes));
      CHECK(group.size() == size);
      int round = 0;
      for (int64_t n : {0, 1, 7, 1024, 1025, 5000}) checkAllReduceFloat(group, n, round++);
      for (int64_t n : {0, 1, 513, 1500}) checkAllReduceDouble(group, n, round++);
      for (int root = 0; root < size; ++root) checkBroadcast(group, 1500, root);
      checkAllGather(group, 700);
      std::vector<int64_t> counts;
      for (int r = 0; r < size; ++r) counts.push_back(100 + 37 * r);
      checkReduceScatter(group, counts);
      checkAllGatherInPlace(group, counts);
      group.barrier();
    });
    checkNoErrors(errors);
  }
  CHECK(leftoverSegments().empty());
}

TEST_CASE("hierarchical group: every rank gets the same bits, where the sums round") {
  const std::vector<int> nodes{0, 0, 1, 1};
  const int64_t n = 3000;
  std::vector<std::vector<float>> results(nodes.size());
  InMemoryStore store;
  auto errors = runRanks(4, [&](int rank) {
    HierarchicalProcessGroup group(store, rank, layout(nodes));
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = 0.1f * float(i + 1) * float(rank + 1) + 1e-3f * float(rank);
    group.allReduceSum(data.data(), n);
    results[rank] = data;
  });
  checkNoErrors(errors);
  for (int r = 1; r < 4; ++r)
    CHECK(std::memcmp(results[r].data(), results[0].data(), n * sizeof(float)) == 0);
  // And it is a sum of the four: within float rounding of the exact one.
  for (int64_t i = 0; i < n; i += 997) {
    double exact = 0;
    for (int r = 0; r < 4; ++r) exact += 0.1f * float(i + 1) * float(r + 1) + 1e-3f * float(r);
    CHECK(results[0][i] == doctest::Approx(exact).epsilon(1e-6));
  }
}

TEST_CASE("hierarchical group: ranks not numbered host by host are refused, naming the rank") {
  InMemoryStore store;
  try {
    HierarchicalProcessGroup group(store, 0, layout({0, 1, 0, 1}));
    FAIL("a layout of interleaved hosts was accepted");
  } catch (const CommError& e) {
    CHECK(std::string(e.what()) ==
          "hierarchical group: rank 2 is on node 0 but not next to that node's other ranks; ranks must be "
          "numbered host by host");
  }
}

TEST_CASE(
    "hierarchical group: a rank that leaves fails the all-reduce inside its host and between the leaders") {
  // Rank 3 (node 1) leaves instead of taking part: its leader, rank 2, fails
  // inside node 1; rank 0 then fails between the leaders, and rank 1, waiting
  // for its leader's result, inside node 0.
  InMemoryStore store;
  auto errors = runRanks(4, [&](int rank) {
    HierarchicalProcessGroup group(store, rank, layout({0, 0, 1, 1}));
    if (rank == 3) return;
    std::vector<float> data(100, 1.0f);
    group.allReduceSum(data.data(), 100);
  });
  CHECK(errors[3] == "");
  INFO(errors[0]);
  INFO(errors[1]);
  INFO(errors[2]);
  CHECK(errors[2].find("hierarchical all-reduce of 100 values, inside node 1 (ranks 2-3 on 10.0.0.2, there "
                       "numbered from 0): ") == 0);
  CHECK(
      errors[0].find("hierarchical all-reduce of 100 values, between the hosts' leaders (there numbered 0 = "
                     "rank 0 (node 0 on 10.0.0.1), 1 = rank 2 (node 1 on 10.0.0.2)): ") == 0);
  CHECK(errors[1].find("hierarchical all-reduce of 100 values, inside node 0 (ranks 0-1 on 10.0.0.1") == 0);
  CHECK(leftoverSegments().empty());
}
