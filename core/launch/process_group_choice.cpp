#include "core/launch/process_group_choice.h"

#include "core/comm/gloo_process_group.h"
#include "core/comm/shm_process_group.h"
#include "core/errors.h"
#include "core/util/seconds.h"

namespace dtrain {

bool allRanksOnOneHost(const Membership& membership) {
  for (const PeerInfo& p : membership.peers)
    if (p.node != membership.peers.front().node) return false;
  return true;
}

std::shared_ptr<ProcessGroup> connectProcessGroup(Store& store, const Membership& membership,
                                                  const JobConfig& job, const std::string& address,
                                                  bool launcher_says_one_host) {
  const std::string& choice = job.strategy.collective;
  const auto timeout = secondsToMillis(job.cluster.collective_timeout_s);
  const bool one_host = launcher_says_one_host || allRanksOnOneHost(membership);
  if (choice == "shared_memory" && !one_host)
    throw ConfigError(
        "[strategy] collective = \"shared_memory\" needs every rank on one host, but the ranks "
        "span several nodes; use collective = \"auto\" (shared memory only where it can be)");
  if (choice == "shared_memory" || (choice == "auto" && one_host)) {
    ShmOptions s;
    s.timeout = timeout;
    s.prefix = "shm";
    return std::make_shared<ShmProcessGroup>(store, membership.rank, membership.world_size, s);
  }
  GlooOptions g;
  g.algorithm = choice;
  g.address = address;
  g.timeout = timeout;
  g.prefix = "gloo";
  return std::make_shared<GlooProcessGroup>(store, membership.rank, membership.world_size, g);
}

}  // namespace dtrain
