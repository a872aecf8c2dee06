// Which collectives a worker connects: shared memory only when every rank is
// on one node; across nodes the hierarchy when a node runs several ranks,
// else Gloo; Gloo whenever a Gloo algorithm is named.
#include "core/launch/process_group_choice.h"

#include <doctest/doctest.h>

#include <thread>

#include "core/comm/gloo_process_group.h"
#include "core/comm/hierarchical_process_group.h"
#include "core/comm/in_memory_store.h"
#include "core/comm/shm_process_group.h"
#include "core/errors.h"

namespace dtrain {
namespace {

Membership membershipOn(const std::vector<int>& nodes, int rank) {
  Membership m;
  m.rank = rank;
  m.world_size = static_cast<int>(nodes.size());
  for (int n : nodes) {
    PeerInfo p;
    p.node = n;
    m.peers.push_back(p);
  }
  return m;
}

JobConfig jobWith(const std::string& collective) {
  JobConfig job;
  job.strategy.collective = collective;
  job.cluster.collective_timeout_s = 5;
  return job;
}

// Connects both ranks of a 2-rank group (threads) and returns rank 0's group.
std::shared_ptr<ProcessGroup> connectTwo(const std::vector<int>& nodes, const std::string& collective) {
  InMemoryStore store;
  std::shared_ptr<ProcessGroup> groups[2];
  std::thread other([&] {
    groups[1] = connectProcessGroup(store, membershipOn(nodes, 1), jobWith(collective), "127.0.0.1");
  });
  groups[0] = connectProcessGroup(store, membershipOn(nodes, 0), jobWith(collective), "127.0.0.1");
  other.join();
  float v[2] = {1.0f, 2.0f};
  float w[2] = {10.0f, 20.0f};
  std::thread reduce([&] { groups[1]->allReduceSum(w, 2); });
  groups[0]->allReduceSum(v, 2);
  reduce.join();
  CHECK(v[0] == 11.0f);
  CHECK(v[1] == 22.0f);
  CHECK(w[1] == 22.0f);
  return groups[0];
}

TEST_CASE("ranks on one node are one host; ranks on two are not") {
  CHECK(allRanksOnOneHost(membershipOn({0, 0, 0}, 0)));
  CHECK_FALSE(allRanksOnOneHost(membershipOn({0, 0, 1, 1}, 2)));
}

TEST_CASE("auto connects shared memory on one host and Gloo across hosts") {
  CHECK(dynamic_cast<ShmProcessGroup*>(connectTwo({0, 0}, "auto").get()) != nullptr);
  CHECK(dynamic_cast<GlooProcessGroup*>(connectTwo({0, 1}, "auto").get()) != nullptr);
}

TEST_CASE("a launcher that puts every rank on this host gets shared memory, though each rank is a node") {
  InMemoryStore store;
  std::shared_ptr<ProcessGroup> groups[2];
  std::thread other([&] {
    groups[1] = connectProcessGroup(store, membershipOn({0, 1}, 1), jobWith("auto"), "127.0.0.1", true);
  });
  groups[0] = connectProcessGroup(store, membershipOn({0, 1}, 0), jobWith("auto"), "127.0.0.1", true);
  other.join();
  CHECK(dynamic_cast<ShmProcessGroup*>(groups[0].get()) != nullptr);
  CHECK(groups[1]->describe() == "shared memory (2 ranks on this host)");
}

// Connects every rank of a group laid over `nodes` (threads), checks one
// all-reduce, and returns rank 0's group.
std::shared_ptr<ProcessGroup> connectAll(const std::vector<int>& nodes, const std::string& collective) {
  InMemoryStore store;
  const int n = static_cast<int>(nodes.size());
  std::vector<std::shared_ptr<ProcessGroup>> groups(nodes.size());
  std::vector<float> sums(nodes.size());
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      groups[r] = connectProcessGroup(store, membershipOn(nodes, r), jobWith(collective), "127.0.0.1");
      sums[r] = static_cast<float>(r + 1);
      groups[r]->allReduceSum(&sums[r], 1);
    });
  for (std::thread& t : ranks) t.join();
  for (float s : sums) CHECK(s == static_cast<float>(n * (n + 1) / 2));
  return groups[0];
}

TEST_CASE("auto takes the hierarchy across hosts when a host runs several ranks; hierarchical insists") {
  auto several = connectAll({0, 0, 1}, "auto");
  CHECK(dynamic_cast<HierarchicalProcessGroup*>(several.get()) != nullptr);
  CHECK(several->describe() ==
        "hierarchical (shared memory inside each of 2 hosts, gloo (auto) between their leaders)");
  CHECK(dynamic_cast<GlooProcessGroup*>(connectAll({0, 1, 2}, "auto").get()) != nullptr);
  CHECK(dynamic_cast<HierarchicalProcessGroup*>(connectAll({0, 1, 2}, "hierarchical").get()) != nullptr);
  // On one host the hierarchy is its shared memory alone.
  CHECK(dynamic_cast<ShmProcessGroup*>(connectAll({0, 0}, "hierarchical").get()) != nullptr);
}

TEST_CASE("a named Gloo algorithm means Gloo even on one host") {
  auto group = connectTwo({0, 0}, "ring");
  CHECK(dynamic_cast<GlooProcessGroup*>(group.get()) != nullptr);
  CHECK(group->describe().find("ring") != std::string::npos);
}

TEST_CASE("shared_memory across hosts is refused in one line before connecting anything") {
  InMemoryStore store;
  CHECK_THROWS_WITH_AS(
      connectProcessGroup(store, membershipOn({0, 1}, 0), jobWith("shared_memory"), "127.0.0.1"),
      "[strategy] collective = \"shared_memory\" needs every rank on one host, but the ranks span "
      "several nodes; use collective = \"auto\" (shared memory only where it can be)",
      ConfigError);
}

}  // namespace
}  // namespace dtrain
