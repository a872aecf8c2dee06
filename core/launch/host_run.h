// One host's part of a multi-process run (strategy mirrored or
// multi_worker_mirrored): node 0 serves the rendezvous; every host starts its
// worker processes (this same program, told by environment variables who
// they are) and watches them until the run ends or one of them fails.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "core/comm/rendezvous_types.h"
#include "core/config/job_config.h"

namespace dtrain {

struct HostRunOptions {
  std::string program;  // this executable, run once per worker
  std::vector<std::string>
      worker_args;          // its arguments: the same command as this host's ("train", job, --set ...)
  int node = -1;            // -1: find this host among [cluster] hosts by its addresses
  std::FILE* log = stderr;  // coordinator and failure lines
};

// Runs the workers of this host to the end; returns the process exit code
// (0, the failed worker's code, or 128 + signal when stopped by one). Throws
// ConfigError/CommError when the run cannot start (port taken, host unknown).
int runHost(const JobConfig& job, const HostRunOptions& options);

// Whether a run of `ranks` ranks goes on without `rank` when it is lost: a
// parameter server's workers other than the chief (strategies/parameter_server;
// not in a synchronous run with sync_batchnorm, whose statistics are summed
// over every worker mid-step), while [strategy] min_workers remain.
bool survivableRank(const JobConfig& job, int ranks, int rank);
// Says so in the coordinator's configuration, for a run of `ranks` ranks.
void allowSurvivableLosses(const JobConfig& job, int ranks, RendezvousServerConfig& config);

// The id every worker of a run presents: the job name and a digest of its
// resolved job file (all but the run directory, which only rank 0 uses), so
// workers started from different job files never join one run.
std::string runJobId(const JobConfig& job);

}  // namespace dtrain
