// Reading rank and world size from srun, mpirun and torchrun variables.
#include "core/config/launch_env.h"

#include <doctest/doctest.h>

#include <map>

#include "tests/config/config_test_util.h"

using dtrain::detectLaunchEnv;
using dtrain::LaunchEnv;
using dtrain::test::configErrorOf;

namespace {

using Env = std::map<std::string, std::string>;

std::optional<LaunchEnv> detect(const Env& env) {
  return detectLaunchEnv([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string errorOf(const Env& env) {
  return configErrorOf([&] { detect(env); });
}

const Env kTorchrun = {
    {"RANK", "5"},       {"WORLD_SIZE", "8"},         {"LOCAL_RANK", "1"},     {"LOCAL_WORLD_SIZE", "4"},
    {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
// Task 6 of an srun step (step 0) of 7 tasks over 2 nodes.
const Env kSlurm = {{"SLURM_PROCID", "6"},
                    {"SLURM_NTASKS", "7"},
                    {"SLURM_LOCALID", "2"},
                    {"SLURM_NODEID", "1"},
                    {"SLURM_STEP_TASKS_PER_NODE", "4,3"},
                    {"SLURM_STEP_ID", "0"}};
// What an sbatch script's shell sees of a 4-task allocation: Slurm's variables
// for its own single process (task 0 of the batch step), no srun step.
const Env kSlurmBatchShell = {{"SLURM_JOB_ID", "77"},         {"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "4"},          {"SLURM_LOCALID", "0"},
                              {"SLURM_NODEID", "0"},          {"SLURM_NTASKS_PER_NODE", "2"},
                              {"SLURM_STEP_ID", "4294967294"}};
const Env kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "3"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};

Env merged(Env a, const Env& b) {
  for (const auto& [k, v] : b) a[k] = v;
  return a;
}

}  // namespace

TEST_CASE("no launcher variables, no launch environment") {
  CHECK_FALSE(detect({}).has_value());
  CHECK_FALSE(detect({{"RANK", "1"}}).has_value());  // RANK alone is not a launch
  CHECK_FALSE(detect({{"RANK", ""}, {"WORLD_SIZE", ""}, {"SLURM_PROCID", ""}}).has_value());  // empty = unset
  CHECK_FALSE(detect({{"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "4"}}).has_value());  // no task, no step
}

TEST_CASE("torchrun variables") {
  std::optional<LaunchEnv> env = detect(kTorchrun);
  REQUIRE(env);
  CHECK(env->source == "torchrun");
  CHECK(env->rank == 5);
  CHECK(env->world_size == 8);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 4);
  CHECK(env->node == 1);
  CHECK(env->coordinator == "10.0.0.1:29500");

  env = detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"NODE_RANK", "0"}});
  REQUIRE(env);
  CHECK(env->local_world_size == -1);
  CHECK(env->node == 0);
  CHECK(env->coordinator == "");  // the job's [cluster] coordinator is used

  env = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  REQUIRE(env);
  CHECK(env->node == -1);

  env = detect(merged(kTorchrun, {{"MASTER_ADDR", "fe80::1"}}));
  CHECK(env->coordinator == "[fe80::1]:29500");
  env = detect(merged(kTorchrun, {{"MASTER_ADDR", "[fe80::1]"}}));
  CHECK(env->coordinator == "[fe80::1]:29500");
}

TEST_CASE("Slurm variables") {
  std::optional<LaunchEnv> env = detect(kSlurm);
  REQUIRE(env);
  CHECK(env->source == "slurm");
  CHECK(env->rank == 6);
  CHECK(env->world_size == 7);
  CHECK(env->local_rank == 2);
  CHECK(env->node == 1);
  CHECK(env->local_world_size == 3);  // node 1's share of "4,3"
  CHECK(env->coordinator == "");

  Env repeated = merged(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                                 {"SLURM_NODEID", "3"},
                                 {"SLURM_PROCID", "6"},
                                 {"SLURM_LOCALID", "0"}});
  CHECK(detect(repeated)->local_world_size == 1);
  repeated["SLURM_NODEID"] = "2";
  repeated["SLURM_LOCALID"] = "1";
  CHECK(detect(repeated)->local_world_size == 2);

  // SLURM_NTASKS_PER_NODE when the step's layout is not given; nothing when neither is.
  Env per_node = kSlurm;
  per_node.erase("SLURM_STEP_TASKS_PER_NODE");
  CHECK(detect(per_node)->local_world_size == -1);
  per_node["SLURM_NTASKS_PER_NODE"] = "4";
  CHECK(detect(per_node)->local_world_size == 4);
  per_node.erase("SLURM_NODEID");
  CHECK(detect(per_node)->node == -1);
  CHECK(detect(per_node)->local_world_size == 4);
}

TEST_CASE("Slurm is the launcher only inside an srun step, not in the batch script or salloc shell") {
  CHECK_FALSE(detect(kSlurmBatchShell).has_value());
  // salloc's shell (and an sbatch script on older Slurm) carries no step id at all.
  Env no_step = kSlurmBatchShell;
  no_step.erase("SLURM_STEP_ID");
  CHECK_FALSE(detect(no_step).has_value());
  // Every special step id (extern, batch, interactive, pending, and the
  // rest of the range Slurm keeps for them) is not srun's.
  for (const char* special : {"4294967295", "4294967294", "4294967293", "4294967290", "4294967280"}) {
    CAPTURE(special);
    CHECK_FALSE(detect(merged(kSlurmBatchShell, {{"SLURM_STEP_ID", special}})).has_value());
    CHECK_FALSE(detect(merged(kSlurm, {{"SLURM_STEP_ID", special}})).has_value());
  }
  // A step id that is not a number does not show an srun step either.
  CHECK_FALSE(detect(merged(kSlurm, {{"SLURM_STEP_ID", "batch"}})).has_value());
  CHECK_FALSE(detect(merged(kSlurm, {{"SLURM_STEP_ID", "-1"}})).has_value());

  // `srun dtrain ...` from that script: an ordinary step id, up to the last one below the special ones.
  for (const char* step : {"0", "3", "4294967279"}) {
    CAPTURE(step);
    std::optional<LaunchEnv> env = detect(merged(kSlurm, {{"SLURM_STEP_ID", step}}));
    REQUIRE(env);
    CHECK(env->source == "slurm");
    CHECK(env->rank == 6);
    CHECK(env->world_size == 7);
  }
  // Older Slurm names it SLURM_STEPID; SLURM_STEP_ID, when there, decides.
  Env old_name = kSlurm;
  old_name.erase("SLURM_STEP_ID");
  old_name["SLURM_STEPID"] = "2";
  CHECK(detect(old_name)->rank == 6);
  old_name["SLURM_STEPID"] = "4294967294";
  CHECK_FALSE(detect(old_name).has_value());
  CHECK(detect(merged(old_name, {{"SLURM_STEP_ID", "2"}}))->rank == 6);

  // The batch shell's Slurm variables are not looked at, even malformed.
  CHECK_FALSE(detect(merged(kSlurmBatchShell, {{"SLURM_PROCID", "x"}})).has_value());
}

TEST_CASE("Open MPI variables") {
  std::optional<LaunchEnv> env = detect(kOpenMpi);
  REQUIRE(env);
  CHECK(env->source == "mpirun");
  CHECK(env->rank == 3);
  CHECK(env->world_size == 4);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 2);
  CHECK(env->node == -1);
  CHECK(env->coordinator == "");
}

TEST_CASE("the innermost launcher wins: torchrun, then mpirun, then Slurm") {
  CHECK(detect(merged(kSlurm, kTorchrun))->source == "torchrun");
  CHECK(detect(merged(kOpenMpi, kTorchrun))->source == "torchrun");
  CHECK(detect(merged(merged(kSlurm, kOpenMpi), kTorchrun))->source == "torchrun");
  // mpirun inside a Slurm allocation starts its daemons with srun, one task per
  // node: every process a daemon starts inherits that step's task numbers.
  std::optional<LaunchEnv> env = detect(
      merged(kOpenMpi,
             {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "1"}}));
  REQUIRE(env);
  CHECK(env->source == "mpirun");
  CHECK(env->rank == 3);
  CHECK(env->world_size == 4);
  // Malformed variables of a launcher that lost are not looked at.
  CHECK(detect(merged(kTorchrun, {{"SLURM_PROCID", "x"}, {"OMPI_COMM_WORLD_RANK", "-1"}}))->rank == 5);
}

TEST_CASE("malformed values name the variable and the value") {
  CHECK(errorOf(merged(kTorchrun, {{"RANK", "abc"}})) ==
        "torchrun environment: RANK must be an integer >= 0 (got \"abc\")");
  CHECK(errorOf(merged(kTorchrun, {{"RANK", "-1"}})) ==
        "torchrun environment: RANK must be an integer >= 0 (got \"-1\")");
  CHECK(errorOf(merged(kTorchrun, {{"WORLD_SIZE", "0"}})) ==
        "torchrun environment: WORLD_SIZE must be an integer >= 1 (got \"0\")");
  CHECK(errorOf(merged(kTorchrun, {{"WORLD_SIZE", "99999999999"}})) ==
        "torchrun environment: WORLD_SIZE must be an integer >= 1 (got \"99999999999\")");
  CHECK(errorOf(merged(kTorchrun, {{"RANK", "8"}})) ==
        "torchrun environment: RANK must be < WORLD_SIZE (got RANK=8, WORLD_SIZE=8)");
  CHECK(errorOf(merged(kTorchrun, {{"LOCAL_RANK", "4"}})) ==
        "torchrun environment: LOCAL_RANK must be < LOCAL_WORLD_SIZE (got LOCAL_RANK=4, LOCAL_WORLD_SIZE=4)");
  CHECK(
      errorOf(merged(kTorchrun, {{"LOCAL_WORLD_SIZE", "9"}})) ==
      "torchrun environment: LOCAL_WORLD_SIZE must be <= WORLD_SIZE (got LOCAL_WORLD_SIZE=9, WORLD_SIZE=8)");
  CHECK(errorOf(merged(kTorchrun, {{"GROUP_RANK", "one"}})) ==
        "torchrun environment: GROUP_RANK must be an integer >= 0 (got \"one\")");
  CHECK(errorOf(merged(kTorchrun, {{"MASTER_PORT", "70000"}})) ==
        "torchrun environment: MASTER_PORT must be a port in [1, 65535] (got \"70000\")");
  CHECK(errorOf(merged(kTorchrun, {{"MASTER_PORT", "http"}})) ==
        "torchrun environment: MASTER_PORT must be a port in [1, 65535] (got \"http\")");
  Env no_port = kTorchrun;
  no_port.erase("MASTER_PORT");
  CHECK(errorOf(no_port) ==
        "torchrun environment: MASTER_ADDR is set but MASTER_PORT is not; set both or neither");
  Env no_local = kTorchrun;
  no_local.erase("LOCAL_RANK");
  CHECK(errorOf(no_local) == "torchrun environment: LOCAL_RANK is not set (RANK and WORLD_SIZE are)");

  CHECK(errorOf(merged(kSlurm, {{"SLURM_PROCID", "7"}})) ==
        "slurm environment: SLURM_PROCID must be < SLURM_NTASKS (got SLURM_PROCID=7, SLURM_NTASKS=7)");
  CHECK(errorOf(merged(kSlurm, {{"SLURM_NTASKS", "4 "}})) ==
        "slurm environment: SLURM_NTASKS must be an integer >= 1 (got \"4 \")");
  CHECK(errorOf(merged(kSlurm, {{"SLURM_NODEID", "-2"}})) ==
        "slurm environment: SLURM_NODEID must be an integer >= 0 (got \"-2\")");
  CHECK(errorOf(merged(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "4(x"}})) ==
        "slurm environment: SLURM_STEP_TASKS_PER_NODE must be a list like \"2(x3),1\" (got \"4(x\")");
  CHECK(errorOf(merged(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "4,,3"}})) ==
        "slurm environment: SLURM_STEP_TASKS_PER_NODE must be a list like \"2(x3),1\" (got \"4,,3\")");
  CHECK(errorOf(merged(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "4,2"}})) ==
        "slurm environment: SLURM_LOCALID must be < SLURM_STEP_TASKS_PER_NODE (got SLURM_LOCALID=2, "
        "SLURM_STEP_TASKS_PER_NODE=2)");
  Env no_tasks = kSlurm;
  no_tasks.erase("SLURM_NTASKS");
  CHECK(errorOf(no_tasks) == "slurm environment: SLURM_NTASKS is not set (SLURM_PROCID is)");

  CHECK(
      errorOf(merged(kOpenMpi, {{"OMPI_COMM_WORLD_SIZE", "3"}})) ==
      "mpirun environment: OMPI_COMM_WORLD_RANK must be < OMPI_COMM_WORLD_SIZE (got OMPI_COMM_WORLD_RANK=3, "
      "OMPI_COMM_WORLD_SIZE=3)");
  CHECK(errorOf(merged(kOpenMpi, {{"OMPI_COMM_WORLD_LOCAL_RANK", "x1"}})) ==
        "mpirun environment: OMPI_COMM_WORLD_LOCAL_RANK must be an integer >= 0 (got \"x1\")");
  Env no_local_mpi = kOpenMpi;
  no_local_mpi.erase("OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK(errorOf(no_local_mpi) ==
        "mpirun environment: OMPI_COMM_WORLD_LOCAL_RANK is not set (OMPI_COMM_WORLD_RANK is)");
}
