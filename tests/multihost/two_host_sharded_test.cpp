// A sharded run (stage 3) across 2 hosts (network namespaces of this
// machine), 2 workers on each: its reduce-scatters and all-gathers cross the
// hosts' Gloo groups; it trains what 4 mirrored workers on one host train,
// up to the sums' order.
#include <doctest/doctest.h>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

TEST_CASE("2 hosts x 2 workers, sharded stage 3, train as 4 mirrored workers on one host") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_sharded");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "one_host.toml", oneHostJob(dir / "one_host"));
  std::string job = twoHostJob(dir / "run", dir / "cluster.token");
  const std::string mirrored = "type = \"multi_worker_mirrored\"";
  job.replace(job.find(mirrored), mirrored.size(), "type = \"sharded\"\nstage = 3");
  writeFile(dir / "job.toml", job);
  const TwoHostRun run = trainOneHostThenTwo(cluster, dir, "one_host.toml", 14);
  INFO("host A: " << run.log_a);
  INFO("host B: " << run.log_b);
  REQUIRE(run.code_a == 0);
  REQUIRE(run.code_b == 0);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "one_host/checkpoints/latest", file) <=
          1e-5);
  }
}
