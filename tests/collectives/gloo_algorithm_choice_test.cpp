#include <doctest/doctest.h>

#include "core/comm/gloo_process_group.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"

using namespace dtrain;

TEST_CASE("gloo auto: the plain ring for small messages, halving-doubling, then the chunked ring") {
  // The ring while (ranks - 1) x bytes < 64 KiB.
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 2, 4) == "ring");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 2, (64 << 10) - 1) == "ring");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 2, 64 << 10) == "halving_doubling");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 5, 16 << 10) == "halving_doubling");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 5, (16 << 10) - 1) == "ring");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 8, (4 << 20) - 1) == "halving_doubling");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 8, 4 << 20) == "ring_chunked");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("auto", 3, 100 << 20) == "ring_chunked");
  // A named algorithm is used whatever the size.
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("ring_chunked", 6, 4) == "ring_chunked");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("bcube", 5, 4) == "bcube");
  CHECK(GlooProcessGroup::allReduceAlgorithmFor("ring", 8, 100 << 20) == "ring");
  CHECK_THROWS_WITH_AS(
      GlooProcessGroup::allReduceAlgorithmFor("tree", 2, 4),
      "unknown all-reduce algorithm 'tree' (known: auto, ring, ring_chunked, halving_doubling, bcube)",
      CommError);
}

TEST_CASE("gloo group of one: rank, size, description, and collectives without a peer") {
  InMemoryStore store;
  GlooOptions options;
  options.algorithm = "halving_doubling";
  options.prefix = "solo";
  GlooProcessGroup group(store, 0, 1, options);
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);
  CHECK(group.describe() == "gloo (halving_doubling)");
  std::vector<float> data{1, 2, 3}, out(3);
  group.allReduceSum(data.data(), 3);
  CHECK(data == std::vector<float>{1, 2, 3});
  group.allGather(data.data(), 3, out.data());
  CHECK(out == data);
}
