// The jobs of the multi-host tests: the small synthetic-data job of the
// training tests, one compute thread per worker (so sums are comparable across
// layouts), run by 2 hosts x 2 workers of a network-namespace cluster.
#pragma once
#include <cmath>
#include <cstdlib>
#include <string>

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

// Test loss of a run's newest checkpoint (dtrain eval --json).
inline double evalLoss(const std::string& run_dir) {
  RunResult r = runDtrain({"eval", run_dir, "--json"});
  size_t at = r.output.find("\"loss\":");
  if (r.exit_code != 0 || at == std::string::npos) return std::nan("");
  return std::atof(r.output.c_str() + at + 7);
}

}  // namespace dtrain::testing
