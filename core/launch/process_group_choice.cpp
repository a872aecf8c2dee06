#include "core/launch/process_group_choice.h"

#include "core/backend/device_query.h"
#include "core/comm/device_groups.h"
#include "core/comm/gloo_process_group.h"
#include "core/comm/hierarchical_process_group.h"
#include "core/comm/shm_process_group.h"
#include "core/errors.h"
#include "core/util/seconds.h"

namespace dtrain {

bool allRanksOnOneHost(const Membership& membership) {
  for (const PeerInfo& p : membership.peers)
    if (p.node != membership.peers.front().node) return false;
  return true;
}

namespace {

// Whether any host runs more than one rank: then the hierarchy moves less
// through TCP than a flat ring (docs/BENCHMARKS.md, hierarchical all-reduce).
bool someHostHasSeveral(const Membership& membership) {
  for (size_t r = 1; r < membership.peers.size(); ++r)
    if (membership.peers[r].node == membership.peers[r - 1].node) return true;
  return false;
}

// Shared memory, the hierarchy or flat Gloo, as [strategy] collective says.
std::shared_ptr<ProcessGroup> connectHostGroup(Store& store, const Membership& membership,
                                               const JobConfig& job, const std::string& address,
                                               bool launcher_says_one_host) {
  const std::string& choice = job.strategy.collective;
  const auto timeout = secondsToMillis(job.cluster.collective_timeout_s);
  const bool one_host = launcher_says_one_host || allRanksOnOneHost(membership);
  if (choice == "shared_memory" && !one_host)
    throw ConfigError(
        "[strategy] collective = \"shared_memory\" needs every rank on one host, but the ranks "
        "span several nodes; use collective = \"auto\" (shared memory only where it can be)");
  if (choice == "shared_memory" || ((choice == "auto" || choice == "hierarchical") && one_host)) {
    ShmOptions s;
    s.timeout = timeout;
    s.prefix = "shm";
    return std::make_shared<ShmProcessGroup>(store, membership.rank, membership.world_size, s);
  }
  if (choice == "hierarchical" || (choice == "auto" && someHostHasSeveral(membership))) {
    HierarchyOptions h;
    h.address = address;
    h.timeout = timeout;
    for (const PeerInfo& p : membership.peers) {
      h.node_of_rank.push_back(p.node);
      h.rank_hosts.push_back(p.host);
    }
    return std::make_shared<HierarchicalProcessGroup>(store, membership.rank, h);
  }
  GlooOptions g;
  g.algorithm = choice;  // "auto" or a Gloo algorithm: the others returned above
  for (const PeerInfo& p : membership.peers) g.rank_hosts.push_back(p.host);
  g.address = address;
  g.timeout = timeout;
  g.prefix = "gloo";
  return std::make_shared<GlooProcessGroup>(store, membership.rank, membership.world_size, g);
}

// The first rank whose host has fewer GPUs than workers, or -1: every rank
// must pick the same backend, so each says whether it has a GPU of its own.
int firstRankSharingAGpu(Store& store, const Membership& membership, bool own_gpu,
                         std::chrono::milliseconds timeout) {
  store.set("backend/own_gpu/" + std::to_string(membership.rank), Bytes{static_cast<uint8_t>(own_gpu)});
  for (int r = 0; r < membership.world_size; ++r) {
    Bytes b = store.get("backend/own_gpu/" + std::to_string(r), timeout);
    if (b.empty() || b[0] == 0) return r;
  }
  return -1;
}

}  // namespace

std::shared_ptr<ProcessGroup> connectProcessGroup(Store& store, const Membership& membership,
                                                  const JobConfig& job, const std::string& address,
                                                  bool launcher_says_one_host, Device device,
                                                  int local_workers) {
  if (device.isCpu()) return connectHostGroup(store, membership, job, address, launcher_says_one_host);
  const std::string& backend = job.strategy.backend;
  const auto timeout = secondsToMillis(job.cluster.collective_timeout_s);
  if (backend != "gloo") {
    const int gpus = visibleCudaDevices();
    const int sharing = firstRankSharingAGpu(store, membership, gpus >= local_workers, timeout);
    if (sharing < 0) return makeNcclGroup(store, membership.rank, membership.world_size, device, timeout);
    if (backend == "nccl") {
      const PeerInfo& p = membership.peers.at(static_cast<size_t>(sharing));
      throw ConfigError("[strategy] backend = \"nccl\" needs a GPU of its own for every rank, but rank " +
                        std::to_string(sharing) + " (host " + p.host +
                        ") shares one with another worker; give each host as many GPUs as workers, or use "
                        "backend = \"gloo\" (or \"auto\"), which stages through host memory");
    }
  }
  return stageThroughHost(connectHostGroup(store, membership, job, address, launcher_says_one_host), device);
}

}  // namespace dtrain
