// How a host's dtrain tells each worker process where the run meets: a few
// environment variables (the token too, so it never shows in `ps`).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct WorkerAssignment {
  std::string coordinator;  // "tcp://host:port"
  std::string token;
  std::string job_id;
  int node = 0;
  int slot = 0;
  int local_workers = 1;  // workers on this host: they share its cores
  std::string address;    // this host's address: where its workers' collectives listen
  // How messages name this worker, after its rank; "" = "node N, slot S".
  // Not passed in the environment: a launcher's workers set it themselves.
  // (= {} keeps aggregate initialisers that stop before it free of warnings.)
  std::string label = {};
  // True when the launcher says every rank of the run is on this host (its
  // local process count is the world size): the collectives may then go
  // through shared memory although each rank counts as its own node. Not
  // passed in the environment either: a host's workers learn it from the
  // rendezvous (every rank on one node).
  bool all_ranks_on_this_host = false;
  // This process's index among its host's processes, when a launcher says
  // (LOCAL_RANK); -1 = the slot. A worker computes on the GPU of that index.
  int local_rank = -1;
  int localIndex() const { return local_rank >= 0 ? local_rank : slot; }
};

// The variables a host's dtrain sets for a worker it starts: the assignment,
// and OpenBLAS held to one thread (the worker's threads call it one each).
std::vector<std::pair<std::string, std::string>> workerEnvironment(const WorkerAssignment& a);
// The assignment this process was started with, or nullopt when it was not
// started as a worker. Throws ConfigError for a malformed variable.
std::optional<WorkerAssignment> workerAssignmentFromEnv();
// True when this process was started by a host's dtrain as one of its workers
// (its assignment variables are set); reads without consuming them.
bool startedAsWorker();

}  // namespace dtrain
