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
  const std::vector<std::string> steps = {"--set", "train.steps=14"};
  std::vector<std::string> one = {"train", dir / "one_host.toml"};
  one.insert(one.end(), steps.begin(), steps.end());
  REQUIRE(runDtrain(one).exit_code == 0);

  std::vector<std::string> args = {"train", dir / "job.toml"};
  args.insert(args.end(), steps.begin(), steps.end());
  pid_t host_b = cluster.start(1, args, dir / "b.log");
  pid_t host_a = cluster.start(0, args, dir / "a.log");
  const int code_a = cluster.wait(host_a, 90);
  const int code_b = cluster.wait(host_b, 10);
  INFO("host A: " << readFile(dir / "a.log"));
  INFO("host B: " << readFile(dir / "b.log"));
  REQUIRE(code_a == 0);
  REQUIRE(code_b == 0);
  // Each host ran its shard: 14 synchronous updates each.
  CHECK(readFile(dir / "a.log").find("shard 0: 14 updates applied (sync)") != std::string::npos);
  CHECK(readFile(dir / "b.log").find("shard 1: 14 updates applied (sync)") != std::string::npos);
  CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "one_host/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}
