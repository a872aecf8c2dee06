// A pipeline across 2 hosts (network namespaces of this machine), in the two
// layouts: 2 stages x 2 replicas, each replica's stages on one host (their
// messages through shared memory, the stages' gradients summed across the
// hosts), and 2 stages x 1 replica, one stage on each host (the messages
// over Gloo between the hosts). Each trains what one process trains with the
// same global batch.
#include <doctest/doctest.h>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

void checkTwoHostPipeline(int replicas, const std::string& messages) {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_pipeline");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "one.toml", oneThread(smallJob(dir / "one")));
  const std::string a = NetnsCluster::address(0), b = NetnsCluster::address(1);
  const std::string slots = std::to_string(replicas);
  writeFile(dir / "job.toml",
            oneThread(smallJob(
                dir / "run", "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 3\nreplicas = " +
                                 slots + "\n[cluster]\ncoordinator = \"" + a + ":29400\"\ntoken_file = \"" +
                                 (dir / "cluster.token") + "\"\nhosts = [{ address = \"" + a +
                                 "\", slots = " + slots + " }, { address = \"" + b + "\", slots = " + slots +
                                 " }]\njoin_timeout_s = 30\nheartbeat_timeout_s = 3\n")));
  const TwoHostRun run = trainOneHostThenTwo(cluster, dir, "one.toml", 14);
  INFO("host A: " << run.log_a);
  INFO("host B: " << run.log_b);
  REQUIRE(run.code_a == 0);
  REQUIRE(run.code_b == 0);
  const std::string& log_a = run.log_a;
  CHECK(log_a.find("2 stages x " + slots + (replicas == 1 ? " replica" : " replicas")) != std::string::npos);
  CHECK(log_a.find("messages over " + messages) != std::string::npos);
  CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "one/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}

}  // namespace

TEST_CASE("a pipeline of 2 stages x 2 replicas, a replica on each of 2 hosts, trains as one process") {
  checkTwoHostPipeline(2, "shared memory");
}

TEST_CASE("a pipeline of 2 stages, one on each of 2 hosts, trains as one process") {
  checkTwoHostPipeline(1, "gloo");
}
