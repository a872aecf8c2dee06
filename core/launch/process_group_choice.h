// Which collectives a worker connects: shared memory when every rank of the
// run is on this host (a mirrored run, one host of launcher ranks), Gloo over
// TCP otherwise. [strategy] collective picks: "auto" takes shared memory on one
// host, the hierarchy (hierarchical_process_group.h: shared memory inside each
// host, Gloo between one leader per host) across hosts when some host runs
// several ranks, else Gloo's size-based choice; "hierarchical" insists on the
// hierarchy (on one host it is shared memory alone); "shared_memory" insists
// on it (and fails naming the hosts when the ranks span several); a Gloo
// algorithm ("ring", "halving_doubling", "bcube") always means flat Gloo.
//
// Ranks on GPUs: [strategy] backend picks NCCL or that host group staged
// through host memory; "auto" takes NCCL only when every rank has a GPU of its
// own (the ranks agree through the store, so all pick the same).
#pragma once
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/rendezvous_types.h"
#include "core/comm/store.h"
#include "core/config/job_config.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// True when every peer of the membership runs on the same node.
bool allRanksOnOneHost(const Membership& membership);

// Connects the group (collective: every rank calls it with the same job).
// `address` is where this rank's Gloo device listens, if Gloo is chosen.
// `launcher_says_one_host`: a launcher reported every rank on this host
// (its ranks each count as a node of their own in the membership).
// `device`: where this rank computes; `local_workers`: the workers on its host.
std::shared_ptr<ProcessGroup> connectProcessGroup(Store& store, const Membership& membership,
                                                  const JobConfig& job, const std::string& address,
                                                  bool launcher_says_one_host = false,
                                                  Device device = Device::cpu(), int local_workers = 1);

}  // namespace dtrain
