// The jobs of the multi-host tests: the small synthetic-data job of the
// training tests, one compute thread per worker (so sums are comparable across
// layouts), run by 2 hosts x 2 workers of a network-namespace cluster.
#pragma once
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/multihost/netns_cluster.h"
#include "tests/train/run_helpers.h"

namespace dtrain::testing {

// Hosts NetnsCluster::address(0) and (1), 2 slots each; a lost peer is
// declared after 3 s. The token is read from `token_file`, as a resumed run
// can read it again (an inline token is not kept in checkpoints).
inline std::string twoHostJob(const std::string& run_dir, const std::string& token_file) {
  const std::string a = NetnsCluster::address(0), b = NetnsCluster::address(1);
  return oneThread(smallJob(run_dir,
                            "[strategy]\ntype = \"multi_worker_mirrored\"\n"
                            "[cluster]\ncoordinator = \"" +
                                a + ":29400\"\ntoken_file = \"" + token_file + "\"\nhosts = [{ address = \"" +
                                a + "\", slots = 2 }, { address = \"" + b +
                                "\", slots = 2 }]\n"
                                "join_timeout_s = 30\nheartbeat_timeout_s = 3\n"));
}

// The same job on one host: 4 worker processes, the same global batch.
inline std::string oneHostJob(const std::string& run_dir) {
  return oneThread(smallJob(run_dir, "[strategy]\ntype = \"mirrored\"\nworkers = 4\n"));
}

// What the two hosts of a run printed, and how each ended.
struct TwoHostRun {
  int code_a = -1, code_b = -1;
  std::string log_a, log_b;
};

// Trains `dir`/one.toml (the one-host reference) and then `dir`/job.toml on
// both hosts of `cluster`, each with `train.steps=steps`; B starts first.
inline TwoHostRun trainOneHostThenTwo(NetnsCluster& cluster, const TempDir& dir,
                                      const std::string& one_host_toml, int steps) {
  const std::vector<std::string> set = {"--set", "train.steps=" + std::to_string(steps)};
  std::vector<std::string> one = {"train", dir / one_host_toml};
  one.insert(one.end(), set.begin(), set.end());
  REQUIRE(runDtrain(one).exit_code == 0);
  std::vector<std::string> args = {"train", dir / "job.toml"};
  args.insert(args.end(), set.begin(), set.end());
  const pid_t host_b = cluster.start(1, args, dir / "b.log");
  const pid_t host_a = cluster.start(0, args, dir / "a.log");
  TwoHostRun out;
  out.code_a = cluster.wait(host_a, 90);
  out.code_b = cluster.wait(host_b, 10);
  out.log_a = readFile(dir / "a.log");
  out.log_b = readFile(dir / "b.log");
  return out;
}

// Test loss of a run's newest checkpoint (dtrain eval --json).
inline double evalLoss(const std::string& run_dir) {
  RunResult r = runDtrain({"eval", run_dir, "--json"});
  size_t at = r.output.find("\"loss\":");
  if (r.exit_code != 0 || at == std::string::npos) return std::nan("");
  return std::atof(r.output.c_str() + at + 7);
}

}  // namespace dtrain::testing
