// A launcher run's plan (coordinator, token, this process's assignment) and
// rank 0's in-process coordinator, without training: ranks equal the
// launcher's whatever order the processes join in.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <thread>

#include "core/comm/rendezvous_client.h"
#include "core/config/parse_job.h"
#include "core/errors.h"
#include "core/launch/host_run.h"
#include "core/launch/launcher_run.h"
#include "tests/common/free_port.h"

using namespace dtrain;
using dtrain::testing::freePort;
using namespace std::chrono_literals;

namespace {

using Vars = std::map<std::string, std::string>;

LaunchEnv detect(const Vars& vars) {
  std::optional<LaunchEnv> env = detectLaunchEnv([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  REQUIRE(env.has_value());
  return *env;
}

// Rank 2 of 4, all on this host (a loopback coordinator serves one host only).
const Vars kTorchrun = {{"RANK", "2"},
                        {"WORLD_SIZE", "4"},
                        {"LOCAL_RANK", "2"},
                        {"LOCAL_WORLD_SIZE", "4"},
                        {"GROUP_RANK", "0"},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29555"},
                        {"TORCHELASTIC_RUN_ID", "run-a"}};

Vars with(Vars vars, const Vars& changes) {
  for (const auto& [k, v] : changes) vars[k] = v;
  return vars;
}

JobConfig parse(const std::string& extra) {
  return parseJobString("[job]\nname = \"plan\"\n" + extra, "plan.toml");
}

const std::string kMirrored4 = "[strategy]\ntype = \"mirrored\"\nworkers = 4\n";
const std::string kCluster =
    "[cluster]\ncoordinator = \"127.0.0.1:29777\"\ntoken = \"secret\"\n"
    "hosts = [{ address = \"127.0.0.1\", slots = 4 }]\n";

// Rank 0's view of a torchrun launch of `world` processes meeting at `host`
// (a free port), as planLauncherRun would give it.
LauncherRun rank0Run(int world, const std::string& host = "127.0.0.1") {
  LauncherRun run;
  run.env = detect(with(kTorchrun, {{"RANK", "0"},
                                    {"LOCAL_RANK", "0"},
                                    {"WORLD_SIZE", std::to_string(world)},
                                    {"LOCAL_WORLD_SIZE", std::to_string(world)}}));
  run.coordinator = host + ":" + std::to_string(freePort());
  run.assignment.job_id = "job-x";
  run.assignment.token = "t";
  return run;
}

// Joins the coordinator of `run` as launcher rank `rank` would.
std::unique_ptr<RendezvousClient> client(const LauncherRun& run, int rank) {
  JoinRequest req;
  req.job_id = run.assignment.job_id;
  req.token = run.assignment.token;
  req.host = "test";
  req.node = rank;  // as planLauncherRun assigns: node = launcher rank, slot 0
  req.pid = 100 + rank;
  ClientTimeouts t;
  t.join = 20s;
  return std::make_unique<RendezvousClient>("tcp://" + run.coordinator, req, t);
}

// An anonymous file for a coordinator's lines, closed when the test ends,
// even by a failed REQUIRE.
class CoordinatorLog {
 public:
  CoordinatorLog() : file_(std::tmpfile()) { REQUIRE(file_ != nullptr); }
  ~CoordinatorLog() { std::fclose(file_); }
  CoordinatorLog(const CoordinatorLog&) = delete;
  CoordinatorLog& operator=(const CoordinatorLog&) = delete;

  std::FILE* file() const { return file_; }
  std::string firstLine() const {
    std::rewind(file_);
    char line[512] = {};
    return std::fgets(line, sizeof line, file_) ? line : "";
  }

 private:
  std::FILE* file_;
};

std::string configError(const JobConfig& job, const LaunchEnv& env) {
  try {
    planLauncherRun(job, env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace

TEST_CASE("launch env: each launcher's launch id; torchrun's agent store") {
  CHECK(detect(kTorchrun).launch_id == "run-a");
  CHECK_FALSE(detect(kTorchrun).coordinator_port_taken);
  CHECK(detect(with(kTorchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}})).coordinator_port_taken);
  CHECK_FALSE(detect(with(kTorchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "False"}})).coordinator_port_taken);
  // Each srun of one allocation is a step of its own: the step tells two runs apart.
  Vars slurm = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "3"}};
  CHECK(detect(slurm).launch_id == "");
  slurm["SLURM_JOB_ID"] = "77";
  CHECK(detect(slurm).launch_id == "77.3");
  CHECK(detect(with(slurm, {{"SLURM_STEP_ID", "4"}})).launch_id == "77.4");
  Vars old_slurm = slurm;  // older Slurm's name for the step
  old_slurm.erase("SLURM_STEP_ID");
  old_slurm["SLURM_STEPID"] = "5";
  CHECK(detect(old_slurm).launch_id == "77.5");
  Vars mpi = {
      {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}};
  CHECK(detect(mpi).launch_id == "");
  CHECK(detect(with(mpi, {{"PMIX_NAMESPACE", "prterun-x-1@1"}})).launch_id == "prterun-x-1@1");
  CHECK(detect(with(mpi, {{"OMPI_MCA_orte_ess_jobid", "123"}, {"PMIX_NAMESPACE", "ns"}})).launch_id == "123");
}

TEST_CASE("plan: torchrun's MASTER_ADDR/MASTER_PORT; rank as node, slot 0; threads shared by local ranks") {
  JobConfig job = parse(kMirrored4 + kCluster);
  LauncherRun run = planLauncherRun(job, detect(kTorchrun));
  CHECK(run.coordinator == "127.0.0.1:29555");  // MASTER_* before [cluster] coordinator
  CHECK(run.assignment.coordinator == "tcp://127.0.0.1:29555");
  CHECK(run.assignment.node == 2);
  CHECK(run.assignment.slot == 0);
  CHECK(run.assignment.local_workers == 4);
  CHECK(run.assignment.address == "127.0.0.1");  // the route toward the coordinator
  CHECK(run.assignment.job_id == runJobId(job));
  CHECK(run.assignment.token == "secret");  // [cluster] token when given
  CHECK(run.assignment.label == "torchrun node 0, local rank 2");
  CHECK(run.notes.empty());                      // 4 processes, 4 slots
  CHECK(run.assignment.all_ranks_on_this_host);  // LOCAL_WORLD_SIZE == WORLD_SIZE: shared memory

  // Without LOCAL_WORLD_SIZE the node's share is unknown: the rank takes all cores.
  Vars bare = kTorchrun;
  bare.erase("LOCAL_WORLD_SIZE");
  bare.erase("GROUP_RANK");
  LauncherRun b = planLauncherRun(job, detect(bare));
  CHECK(b.assignment.local_workers == 1);
  CHECK(b.assignment.label == "torchrun local rank 2");
  CHECK_FALSE(b.assignment.all_ranks_on_this_host);  // unknown: Gloo, which works anywhere
}

TEST_CASE("plan: a loopback coordinator for a launch over several hosts is refused") {
  LaunchEnv env =
      detect(with(kTorchrun, {{"LOCAL_WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"GROUP_RANK", "1"}}));
  CHECK(configError(parse(kMirrored4), env) ==
        "the rendezvous coordinator 127.0.0.1:29555 is reached over loopback here (127.0.0.1), but the "
        "torchrun "
        "launch spans several hosts, which could not reach this one: name rank 0's host by an address the "
        "others reach (MASTER_ADDR or [cluster] coordinator), or map its name to that address in /etc/hosts");
  // Node 1 of a launch whose node sizes are unknown spans hosts too.
  Vars no_sizes = with(kTorchrun, {{"GROUP_RANK", "1"}});
  no_sizes.erase("LOCAL_WORLD_SIZE");
  CHECK(configError(parse(kMirrored4), detect(no_sizes)).find("reached over loopback") != std::string::npos);
}

TEST_CASE("plan: when torchrun's agent holds MASTER_PORT, [cluster] coordinator, else the next port") {
  LaunchEnv env = detect(with(kTorchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  CHECK(planLauncherRun(parse(kMirrored4 + kCluster), env).coordinator == "127.0.0.1:29777");
  CHECK(planLauncherRun(parse(kMirrored4), env).coordinator == "127.0.0.1:29556");
}

TEST_CASE("plan: Slurm without MASTER_* takes [cluster] coordinator, or says to set it") {
  LaunchEnv env =
      detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}});
  CHECK(planLauncherRun(parse(kMirrored4 + kCluster), env).coordinator == "127.0.0.1:29777");
  CHECK(configError(parse(kMirrored4), env) ==
        "slurm started this process but the job names no rendezvous coordinator: set [cluster] coordinator = "
        "\"host:port\" (rank 0's host and a free port), or MASTER_ADDR and MASTER_PORT");
}

TEST_CASE("plan: one_device refuses several processes; the launcher's count wins over the job's") {
  LaunchEnv env = detect(kTorchrun);
  CHECK(
      configError(parse(""), env) ==
      "torchrun started 4 processes but the job's [strategy] type is 'one_device' (one process): set type = "
      "\"mirrored\" or \"multi_worker_mirrored\", or start a single process");
  LauncherRun run = planLauncherRun(parse("[strategy]\ntype = \"mirrored\"\nworkers = 3\n"), env);
  REQUIRE(run.notes.size() == 1);
  CHECK(run.notes[0] ==
        "dtrain: torchrun started 4 processes but the job asks for 3 ([strategy] workers): running 4 ranks, "
        "one "
        "per process, as the launcher says");
}

TEST_CASE("token: [cluster] token, else derived from the launch id and the job id") {
  JobConfig job = parse(kMirrored4);
  LaunchEnv a = detect(kTorchrun);
  LaunchEnv b = detect(with(kTorchrun, {{"TORCHELASTIC_RUN_ID", "run-b"}}));
  LaunchEnv a_rank0 = detect(with(kTorchrun, {{"RANK", "0"}, {"LOCAL_RANK", "1"}}));
  const std::string id = runJobId(job);
  CHECK(launcherRunToken(job, a, id) == launcherRunToken(job, a_rank0, id));  // every rank of a launch agrees
  CHECK(launcherRunToken(job, a, id) != launcherRunToken(job, b, id));        // two launches do not mix
  CHECK(launcherRunToken(job, a, id) != launcherRunToken(job, a, id + "x"));  // nor two jobs
  CHECK(launcherRunToken(parse(kMirrored4 + kCluster), a, id) == "secret");
}

TEST_CASE("coordinator: ranks are the launcher's whatever order the processes join in; all leave -> clean") {
  JobConfig job = parse(kMirrored4 + kCluster);
  LauncherRun run = rank0Run(3);
  CoordinatorLog log;
  LauncherCoordinator coordinator(job, run, log.file());
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  for (int r = 0; r < 3; ++r) clients.push_back(client(run, r));
  std::vector<int> ranks(3, -1);
  std::vector<std::thread> joins;
  for (int r : {2, 0, 1}) {  // out of order
    joins.emplace_back(
        [&, r] { ranks[static_cast<size_t>(r)] = clients[static_cast<size_t>(r)]->join().rank; });
    std::this_thread::sleep_for(50ms);
  }
  for (auto& t : joins) t.join();
  CHECK(ranks == std::vector<int>{0, 1, 2});
  clients[0]->leave();
  clients[2]->leave();
  // Rank 1 has not left yet: rank 0 waits for it, up to the deadline.
  std::optional<std::string> early = coordinator.awaitOthers(200ms);
  REQUIRE(early.has_value());
  CHECK(early->find("not every rank had finished") != std::string::npos);
  clients[1]->leave();
  CHECK(coordinator.awaitOthers(5s) == std::nullopt);
}

TEST_CASE("coordinator: a rank that aborts is the reason the run did not end cleanly") {
  JobConfig job = parse(kMirrored4 + kCluster);
  LauncherRun run = rank0Run(2);
  CoordinatorLog log;
  LauncherCoordinator coordinator(job, run, log.file());
  std::unique_ptr<RendezvousClient> zero = client(run, 0), one = client(run, 1);
  std::thread other([&] { one->join(); });
  CHECK(zero->join().rank == 0);
  other.join();
  zero->leave();
  one->abort("rank 1: out of disk");
  std::optional<std::string> failure = coordinator.awaitOthers(5s);
  REQUIRE(failure.has_value());
  CHECK(failure->find("out of disk") != std::string::npos);
}

TEST_CASE("coordinator: a coordinator address that is not this host's gets a warning line") {
  JobConfig job = parse(kMirrored4 + kCluster);
  LauncherRun run = rank0Run(2, "192.0.2.1");  // TEST-NET-1: never an address of this host
  CoordinatorLog log;
  { LauncherCoordinator coordinator(job, run, log.file()); }
  CHECK(log.firstLine().find("dtrain: coordinator: warning: " + run.coordinator +
                             " is not an address of this host") == 0);
}
