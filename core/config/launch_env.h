// Where this process sits in a run started by a launcher (srun, mpirun,
// torchrun): its rank, the world size, its rank on the node, read from the
// variables each launcher sets. Without a launcher dtrain finds its place
// from [cluster] and --node instead (local_node.h).
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace dtrain {

struct LaunchEnv {
  std::string source;  // "slurm" | "mpirun" | "torchrun"
  int rank = 0;        // 0 .. world_size-1
  int world_size = 1;
  int local_rank = 0;         // rank among the processes on this node
  int local_world_size = -1;  // processes on this node, when the launcher says; else -1
  int node = -1;              // this node's index, when the launcher says; else -1
  // "host:port" from MASTER_ADDR/MASTER_PORT when set; "" = use [cluster] coordinator.
  std::string coordinator;
  // True when torchrun's agent itself serves a store on MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): that port is taken, and MASTER_ADDR
  // is the agent's host, not necessarily rank 0's.
  bool coordinator_port_taken = false;
  // The launcher's id of this launch (SLURM_JOB_ID, Open MPI's job id,
  // TORCHELASTIC_RUN_ID): the same for every process of one launch; "" when unknown.
  std::string launch_id;
};

// Reads the launcher's variables through `getenv_fn` (std::getenv, or a fake
// in tests); an unset or empty variable counts as absent. nullopt when no
// launcher's variables are there. Throws ConfigError naming the variable and
// its value when one is malformed (not an integer, negative, rank >= world
// size, a local rank outside the node's share) or one the launcher always sets
// is missing.
//   torchrun: RANK, WORLD_SIZE, LOCAL_RANK; LOCAL_WORLD_SIZE, GROUP_RANK (or
//             NODE_RANK), MASTER_ADDR + MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE,
//             TORCHELASTIC_RUN_ID optional
//   mpirun:   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK; _LOCAL_SIZE and the
//             job id (OMPI_MCA_orte_ess_jobid, or PMIX_NAMESPACE) optional
//   slurm:    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; SLURM_NODEID,
//             SLURM_STEP_TASKS_PER_NODE (or SLURM_NTASKS_PER_NODE) and
//             SLURM_JOB_ID optional. Only inside an srun job step: SLURM_STEP_ID
//             (or SLURM_STEPID) set to an ordinary step number. A batch script's
//             or salloc shell's SLURM_* (no step id, or a special one >=
//             4294967280, such as the batch step's 4294967294) are ignored: that
//             shell is one process, not rank 0 of the allocation's tasks.
std::optional<LaunchEnv> detectLaunchEnv(const std::function<const char*(const char*)>& getenv_fn);
std::optional<LaunchEnv> detectLaunchEnv();  // from this process's environment

}  // namespace dtrain
