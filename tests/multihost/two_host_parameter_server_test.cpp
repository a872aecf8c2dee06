// A parameter-server run across 2 hosts (network namespaces of this
// machine): 2 workers on each host and a shard on each, reached over TCP; it
// trains what 4 mirrored workers on one host train.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

TEST_CASE("2 hosts x 2 workers with a parameter-server shard on each train as 4 mirrored workers") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_ps");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "one_host.toml", oneHostJob(dir / "one_host"));
  const std::string a = NetnsCluster::address(0), b = NetnsCluster::address(1);
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run",
                                                 "[strategy]\ntype = \"parameter_server\"\nps = 2\n"
                                                 "[cluster]\ncoordinator = \"" +
                                                     a + ":29400\"\ntoken_file = \"" +
                                                     (dir / "cluster.token") + "\"\nhosts = [{ address = \"" +
                                                     a + "\", slots = 2, ps = 1 }, { address = \"" + b +
                                                     "\", slots = 2, ps = 1 }]\n"
                                                     "join_timeout_s = 30\nheartbeat_timeout_s = 3\n")));
  const TwoHostRun run = trainOneHostThenTwo(cluster, dir, "one_host.toml", 14);
  INFO("host A: " << run.log_a);
  INFO("host B: " << run.log_b);
  REQUIRE(run.code_a == 0);
  REQUIRE(run.code_b == 0);
  // Each host ran its shard: 14 synchronous updates each.
  CHECK(run.log_a.find("shard 0: 14 updates applied (sync)") != std::string::npos);
  CHECK(run.log_b.find("shard 1: 14 updates applied (sync)") != std::string::npos);
  CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "one_host/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}
