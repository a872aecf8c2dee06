// A run whose processes a launcher started (srun, mpirun, torchrun): one
// process per rank, rank and world size from the launcher's variables
// (core/config/launch_env.h). dtrain starts no processes then: each process
// is one worker of the run, and the one with launcher rank 0 also serves the
// rendezvous inside itself (LauncherCoordinator) for as long as it trains.
//
// Ranks: the coordinator is given one node of one slot per launcher rank and
// each process joins as (node = its launcher rank, slot 0), so the rank the
// rendezvous hands out is the launcher's rank whatever order the processes
// arrive in, and however the launcher spread ranks over hosts.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/config/launch_env.h"
#include "core/launch/worker_env.h"

namespace dtrain {

class RendezvousServer;

struct LauncherRun {
  LaunchEnv env;
  // What this process joins with: coordinator, token, job id, node = its
  // launcher rank, slot 0, the processes sharing its host, its address.
  WorkerAssignment assignment;
  std::string coordinator;  // "host:port" rank 0 serves and every rank joins
  // Lines rank 0 prints before the run (the launcher's process count
  // overriding the job's); empty when there is nothing to say.
  std::vector<std::string> notes;
};

// Where and how this process takes part. The coordinator: MASTER_ADDR and
// MASTER_PORT when the launcher sets them, else [cluster] coordinator (first
// also when torchrun's agent holds MASTER_PORT for its own store, after
// which MASTER_ADDR with the next port is the fallback). Throws ConfigError
// for a job that cannot run as several processes (strategy one_device) or
// when no coordinator is known, and CommError when the coordinator host does
// not resolve.
LauncherRun planLauncherRun(const JobConfig& job, const LaunchEnv& env);

// The secret every process of the run presents: [cluster] token (or
// token_file) when the job gives one; else one derived from the launch id
// and the job id. The derived one only keeps two runs (two launches, or two
// jobs on one port) from mixing; anyone who can read the job and the
// launcher's variables knows it. [cluster] token is how to keep others out.
std::string launcherRunToken(const JobConfig& job, const LaunchEnv& env, const std::string& job_id);

// Rank 0's in-process rendezvous coordinator, expecting the launcher's
// world size. Threading: the server runs on its own thread; call the rest
// from one thread.
class LauncherCoordinator {
 public:
  // Binds the coordinator's port on every interface and starts serving;
  // throws CommError when the port is taken. `log` gets its lines, and a
  // warning when the coordinator's host is not this one (the others would
  // look for it elsewhere).
  LauncherCoordinator(const JobConfig& job, const LauncherRun& run, std::FILE* log = stderr);
  ~LauncherCoordinator();
  LauncherCoordinator(const LauncherCoordinator&) = delete;
  LauncherCoordinator& operator=(const LauncherCoordinator&) = delete;

  // After rank 0's clean end: serves until every other rank has left too.
  // Returns why the run did not end cleanly (a rank was lost or aborted, or
  // not all had left within `within`), or nullopt.
  std::optional<std::string> awaitOthers(std::chrono::milliseconds within);
  // After rank 0 failed: serves a moment longer, so the abort notice and
  // refusals already sent reach the other ranks before the socket closes.
  void lingerAfterFailure();

 private:
  std::unique_ptr<RendezvousServer> server_;
};

}  // namespace dtrain
