// A run across 2 hosts with different addresses (network namespaces of this
// machine): it trains what one host with the same number of workers trains,
// and only node 0 touches the run directory.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// 2 epochs of 21 steps.
const std::vector<std::string> kTwoEpochs = {"-q", "--set", "train.epochs=2"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE(
    "2 hosts x 2 workers reach the test loss of 1 host x 4 workers, over the hierarchy and a flat ring") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_eq");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "one_host.toml", oneHostJob(dir / "one_host"));
  writeFile(dir / "job.toml", twoHostJob(dir / "run", dir / "cluster.token"));
  RunResult one_host = runDtrain(with({"train", dir / "one_host.toml"}, kTwoEpochs));
  INFO(one_host.output);
  REQUIRE(one_host.exit_code == 0);
  const double reference = evalLoss(dir / "one_host");

  // "auto" takes the hierarchy (each host's pair sums over shared memory, the
  // two leaders over Gloo); "ring" a flat Gloo ring over the 4 ranks.
  for (const std::string collective : {"auto", "ring"}) {
    CAPTURE(collective);
    // Not quiet: the start-up line says what carries the all-reduce.
    const std::vector<std::string> set = {"--set", "train.epochs=2", "--set",
                                          "strategy.collective=" + collective, "--overwrite"};
    // Host B first, finding its node by its address; it waits for node 0's coordinator.
    pid_t b = cluster.start(1, with({"train", dir / "job.toml"}, set), dir / "b.log");
    pid_t a = cluster.start(0, with({"train", dir / "job.toml", "--node", "0"}, set), dir / "a.log");
    const int code_a = cluster.wait(a, 60);
    const int code_b = cluster.wait(b, 10);
    const std::string log_a = readFile(dir / "a.log");
    INFO("host A: " << log_a);
    INFO("host B: " << readFile(dir / "b.log"));
    REQUIRE(code_a == 0);
    REQUIRE(code_b == 0);
    CHECK(log_a.find("done: step 42,") != std::string::npos);
    CHECK(log_a.find("4 workers on 2 node(s)") != std::string::npos);
    CHECK(log_a.find(collective == "auto" ? "over hierarchical (shared memory inside each of 2 hosts, gloo"
                                          : "over gloo (ring)") != std::string::npos);

    const double two_hosts = evalLoss(dir / "run");
    CAPTURE(reference);
    CAPTURE(two_hosts);
    CHECK(std::fabs(two_hosts - reference) <= 1e-4 * std::fabs(reference));
  }
}

TEST_CASE("2 hosts: a host that finds itself by address leaves node 0's run directory to node 0") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_rundir");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "job.toml", twoHostJob(dir / "run", dir / "cluster.token"));
  // An earlier run in the run directory (on a filesystem the hosts share).
  fs::create_directories(dir / "run");
  writeFile(dir / "run/metrics.jsonl", "earlier run\n");

  // The same command on both hosts, as scripts/launch-ssh.sh runs it. Host B
  // starts its workers only after deciding about the run directory.
  const std::vector<std::string> args = with({"train", dir / "job.toml", "--overwrite"}, kTwoEpochs);
  pid_t b = cluster.start(1, args, dir / "b.log");
  const bool b_started_workers = waitFor([&] { return cluster.pids(1).size() >= 3; }, 20);
  INFO("host B: " << readFile(dir / "b.log"));
  REQUIRE(b_started_workers);
  CHECK(readFile(dir / "run/metrics.jsonl") == "earlier run\n");

  pid_t a = cluster.start(0, args, dir / "a.log");
  const int code_a = cluster.wait(a, 60);
  const int code_b = cluster.wait(b, 10);
  INFO("host A: " << readFile(dir / "a.log"));
  CHECK(code_a == 0);
  CHECK(code_b == 0);
  // Node 0 replaced the earlier run with this one.
  CHECK(readFile(dir / "run/metrics.jsonl").rfind("earlier run", 0) == std::string::npos);
  REQUIRE(!stepDirs(dir / "run").empty());
  CHECK(stepDirs(dir / "run").back() == "step-00000042");
}

TEST_CASE("2 hosts: bench allreduce --job times the hierarchy and the flat ring over the job's hosts") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_bench");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "job.toml", twoHostJob(dir / "run", dir / "cluster.token"));
  for (const std::string collective : {"hierarchical", "ring"}) {
    CAPTURE(collective);
    const std::vector<std::string> args = {"bench", "allreduce", "--job", dir / "job.toml", "--mb",
                                           "2",     "--iters",   "3",     "--collective",   collective};
    pid_t b = cluster.start(1, args, dir / "b.log");
    pid_t a = cluster.start(0, with(args, {"--node", "0"}), dir / "a.log");
    const int code_a = cluster.wait(a, 60);
    const int code_b = cluster.wait(b, 10);
    const std::string log_a = readFile(dir / "a.log");
    INFO("host A: " << log_a);
    INFO("host B: " << readFile(dir / "b.log"));
    CHECK(code_a == 0);
    CHECK(code_b == 0);
    CHECK(log_a.find(collective == "ring"
                         ? "between 4 ranks over TCP, gloo ring: median "
                         : "between 4 ranks over hierarchical (shared memory inside each of "
                           "2 hosts, gloo (auto) between their leaders): median ") != std::string::npos);
    CHECK(log_a.find("every result verified") != std::string::npos);
  }
}
