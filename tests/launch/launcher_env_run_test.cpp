// dtrain under a cluster's launcher, through the binary: processes started
// with torchrun-, Slurm- or mpirun-style variables train as one run (one rank
// each, rank 0 serving the rendezvous) and reach what `dtrain train` reaches
// with its own worker processes; a rank without peers, or that loses one,
// ends with one line and a non-zero code.
#include <doctest/doctest.h>

#include <cmath>
#include <utility>

#include "tests/common/free_port.h"
#include "tests/train/run_helpers.h"

extern char** environ;

using namespace dtrain::testing;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Whether `name` is a variable some launcher (or a host's dtrain) sets: the
// test's own environment must not leak into the processes it starts.
bool isLauncherVariable(const std::string& name) {
  for (const char* prefix : {"SLURM_", "OMPI_", "PMIX_", "TORCHELASTIC_", "DTRAIN_WORKER_"})
    if (name.rfind(prefix, 0) == 0) return true;
  for (const char* exact : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
                            "MASTER_ADDR", "MASTER_PORT"})
    if (name == exact) return true;
  return false;
}

// Starts the dtrain binary with `args`, the launcher variables `env` and no
// others, output (stdout and stderr) to `log`.
pid_t startLaunched(const std::vector<std::string>& args, const Env& env, const std::string& log) {
  return startDtrain(args, log, [&env] {
    std::vector<std::string> names;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      std::string name = kv.substr(0, kv.find('='));
      if (isLauncherVariable(name)) names.push_back(name);
    }
    for (const std::string& n : names) ::unsetenv(n.c_str());
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  });
}

// torchrun's variables for `rank` of `world` processes on one node.
Env torchrun(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_RUN_ID", "launcher-test"}};
}

// srun's variables for `rank` of `world` tasks on one node.
Env slurm(int rank, int world) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", std::to_string(world)},
          {"SLURM_LOCALID", std::to_string(rank)},
          {"SLURM_NODEID", "0"},
          {"SLURM_STEP_TASKS_PER_NODE", std::to_string(world)},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"}};
}

// What the shell of an sbatch script sees in an allocation of `world` tasks:
// its own process is task 0 of the batch step, which srun did not start.
Env slurmBatchScript(int world) {
  return {{"SLURM_PROCID", "0"},
          {"SLURM_NTASKS", std::to_string(world)},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "0"},
          {"SLURM_NTASKS_PER_NODE", std::to_string(world)},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "4294967294"}};
}

struct Finished {
  int exit_code = -1;
  std::string log;
};

// Runs one process per entry of `envs` (each its rank's variables) to the end.
std::vector<Finished> runLaunched(const std::vector<std::string>& args, const std::vector<Env>& envs,
                                  const TempDir& dir) {
  std::vector<pid_t> pids;
  for (size_t r = 0; r < envs.size(); ++r)
    pids.push_back(startLaunched(args, envs[r], dir / ("rank" + std::to_string(r) + ".log")));
  std::vector<Finished> out;
  for (size_t r = 0; r < pids.size(); ++r)
    out.push_back(Finished{waitExit(pids[r]), readFile(dir / ("rank" + std::to_string(r) + ".log"))});
  return out;
}

// The small job with one compute thread per process and `extra` appended.
std::string job(const std::string& run_dir, const std::string& extra) {
  std::string text = smallJob(run_dir, extra);
  text.replace(text.find("threads = 2"), 11, "threads = 1");
  return text;
}

std::string mirrored(int workers) {
  return "[strategy]\ntype = \"mirrored\"\nworkers = " + std::to_string(workers) + "\n";
}

// The loss `dtrain train` reaches with `workers` worker processes of its own.
double referenceLoss(const TempDir& dir, int workers) {
  std::string run = dir / ("reference" + std::to_string(workers));
  writeFile(run + ".toml", job(run, mirrored(workers)));
  Finished f = runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=2"}, {Env{}}, dir)[0];
  INFO(f.log);
  REQUIRE(f.exit_code == 0);
  return evalFigures(run).loss;
}

// One run, not one per process: only rank 0 served a coordinator (each process
// would, were it a host starting workers of its own).
void checkOneCoordinator(const std::vector<Finished>& ranks) {
  const std::string formed =
      "dtrain: coordinator: group formed: generation 1, " + std::to_string(ranks.size()) + " workers";
  CHECK(ranks[0].log.find(formed) != std::string::npos);
  for (size_t r = 1; r < ranks.size(); ++r) {
    CAPTURE(r);
    CHECK(ranks[r].log.find("dtrain: coordinator:") == std::string::npos);
  }
}

bool closeTo(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::fabs(b); }

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("torchrun: 2 and 3 launched ranks train as `dtrain train` with as many workers") {
  TempDir dir("launch_torchrun");
  for (int n : {2, 3}) {
    CAPTURE(n);
    const double reference = referenceLoss(dir, n);
    std::string run = dir / ("torchrun" + std::to_string(n));
    writeFile(run + ".toml", job(run, mirrored(n)));
    std::vector<Env> envs;
    int port = freePort();
    for (int r = 0; r < n; ++r) envs.push_back(torchrun(r, n, port));
    std::vector<Finished> ranks =
        runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=2"}, envs, dir);
    for (const Finished& f : ranks) {
      INFO(f.log);
      CHECK(f.exit_code == 0);
    }
    checkOneCoordinator(ranks);
    // Only rank 0 writes: the run directory holds one run, evaluated like the reference.
    CHECK(closeTo(evalFigures(run).loss, reference));
  }
}

TEST_CASE("torchrun: a multi_worker_mirrored job needs no hosts, coordinator or token under the launcher") {
  // The launcher gives the ranks and MASTER_ADDR, and the token derives from
  // its run id: neither a missing [cluster] nor one without those is refused.
  TempDir dir("launch_no_cluster");
  const double reference = referenceLoss(dir, 2);
  for (const char* cluster : {"", "[cluster]\nheartbeat_timeout_s = 5\n"}) {
    CAPTURE(cluster);
    std::string run = dir / (std::string("mwm") + (*cluster ? "_cluster" : ""));
    writeFile(run + ".toml",
              job(run, std::string("[strategy]\ntype = \"multi_worker_mirrored\"\n") + cluster));
    const int port = freePort();
    std::vector<Finished> ranks = runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=2"},
                                              {torchrun(0, 2, port), torchrun(1, 2, port)}, dir);
    for (const Finished& f : ranks) {
      INFO(f.log);
      CHECK(f.exit_code == 0);
      CHECK(f.log.find("the job asks for") == std::string::npos);
    }
    checkOneCoordinator(ranks);
    CHECK(closeTo(evalFigures(run).loss, reference));
  }
  // Without a launcher the same job still needs its [cluster].
  const RunResult alone = runDtrain({"train", dir / "mwm.toml"});
  CHECK(alone.exit_code != 0);
  CHECK(alone.output.find("'multi_worker_mirrored' needs a [cluster] section") != std::string::npos);
}

TEST_CASE("torchrun: resume RUN_DIR on launched ranks continues as `dtrain resume` does") {
  TempDir dir("launch_resume");
  // Each run: one epoch, then resumed to two (the schedule follows the epochs
  // asked for, so both runs take the same two steps).
  auto trainThenResume = [&](const std::string& name, int ranks) {
    std::string run = dir / name;
    writeFile(run + ".toml", job(run, mirrored(2)));
    int port = freePort();
    std::vector<Env> envs(1);
    if (ranks > 1) envs = {torchrun(0, 2, port), torchrun(1, 2, port)};
    for (const Finished& f :
         runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=1"}, envs, dir)) {
      INFO(f.log);
      REQUIRE(f.exit_code == 0);
    }
    port = freePort();
    if (ranks > 1) envs = {torchrun(0, 2, port), torchrun(1, 2, port)};
    std::vector<Finished> resumed = runLaunched({"resume", run, "-q", "--set", "train.epochs=2"}, envs, dir);
    for (const Finished& f : resumed) {
      INFO(f.log);
      REQUIRE(f.exit_code == 0);
    }
    if (ranks > 1) checkOneCoordinator(resumed);
    return evalFigures(run).loss;
  };
  const double reference = trainThenResume("reference", 1);  // dtrain's own 2 worker processes
  CHECK(closeTo(trainThenResume("launched", 2), reference));
}

TEST_CASE("slurm: [cluster] coordinator; the launcher's 2 tasks win over the job's 3 slots") {
  TempDir dir("launch_slurm");
  const double reference = referenceLoss(dir, 2);
  std::string run = dir / "slurm";
  int port = freePort();
  writeFile(run + ".toml", job(run,
                               "[strategy]\ntype = \"multi_worker_mirrored\"\n"
                               "[cluster]\ncoordinator = \"127.0.0.1:" +
                                   std::to_string(port) +
                                   "\"\ntoken = \"launcher-test-secret\"\n"
                                   "hosts = [{ address = \"127.0.0.1\", slots = 3 }]\n"));
  std::vector<Finished> ranks =
      runLaunched({"train", run + ".toml", "--set", "train.epochs=2"}, {slurm(0, 2), slurm(1, 2)}, dir);
  for (const Finished& f : ranks) {
    INFO(f.log);
    CHECK(f.exit_code == 0);
  }
  checkOneCoordinator(ranks);
  CHECK(ranks[0].log.find("dtrain: slurm started 2 processes but the job asks for 3") != std::string::npos);
  CHECK(ranks[1].log.find("asks for") == std::string::npos);  // rank 0 alone says so
  CHECK(closeTo(evalFigures(run).loss, reference));
}

TEST_CASE("slurm: `dtrain train` in a batch script is no task of the allocation: it starts its own workers") {
  TempDir dir("launch_sbatch");
  std::string run = dir / "run";
  writeFile(run + ".toml", job(run, mirrored(2)));
  Finished f =
      runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=1"}, {slurmBatchScript(4)}, dir)[0];
  INFO(f.log);
  // Taken for rank 0 of the allocation's 4 tasks, it would refuse the job (no
  // coordinator named) or wait for 3 peers that never come.
  CHECK(f.exit_code == 0);
  CHECK(f.log.find("dtrain: coordinator: group formed: generation 1, 2 workers") != std::string::npos);
  CHECK(f.log.find("slurm") == std::string::npos);
  CHECK(!stepDirs(run).empty());
}

TEST_CASE("a launched rank whose peers never come fails with one line within the join timeout") {
  TempDir dir("launch_alone");
  std::string run = dir / "alone";
  writeFile(run + ".toml",
            job(run, mirrored(2) + "[cluster]\ncoordinator = \"127.0.0.1:1\"\ntoken = \"t\"\n"
                                   "hosts = [{ address = \"127.0.0.1\", slots = 2 }]\njoin_timeout_s = 2\n"));
  const int port = freePort();
  // Runs rank `rank` of 2 alone; it must end within seconds of the join timeout.
  auto runAlone = [&](int rank) {
    auto t0 = std::chrono::steady_clock::now();
    Finished f = runLaunched({"train", run + ".toml", "-q"}, {torchrun(rank, 2, port)}, dir)[0];
    CHECK_MESSAGE(secondsSince(t0) < 10.0, f.log);
    return f;
  };
  SUBCASE("rank 0 waits for rank 1") {
    Finished f = runAlone(0);
    INFO(f.log);
    CHECK(f.exit_code == 1);
    CHECK(f.log.find("dtrain: error: ") != std::string::npos);
    CHECK(f.log.find("did not form within 2") != std::string::npos);
    CHECK(f.log.find("torchrun rank 1") != std::string::npos);  // names the missing rank
  }
  SUBCASE("rank 1 waits for rank 0, which serves the rendezvous") {
    Finished f = runAlone(1);
    INFO(f.log);
    CHECK(f.exit_code == 1);
    CHECK(lineCount(f.log) == 1);
    CHECK(f.log.find("dtrain: error: ") == 0);
    CHECK(f.log.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  }
  CHECK(!fs::exists(run + "/metrics.jsonl"));
}

TEST_CASE("kill -9 of a launched rank stops the others within seconds, with one line each") {
  TempDir dir("launch_kill");
  std::string run = dir / "run";
  // [cluster] only for its timeouts: MASTER_ADDR/MASTER_PORT name the coordinator.
  writeFile(run + ".toml", job(run, mirrored(3) + "[cluster]\ncoordinator = \"127.0.0.1:1\"\ntoken = \"t\"\n"
                                                  "hosts = [{ address = \"127.0.0.1\", slots = 3 }]\n"
                                                  "heartbeat_interval_s = 0.5\nheartbeat_timeout_s = 3\n"));
  for (int victim : {1, 0}) {  // a plain rank, then rank 0 with the coordinator
    CAPTURE(victim);
    fs::remove_all(run);
    int port = freePort();
    std::vector<pid_t> pids;
    for (int r = 0; r < 3; ++r)
      pids.push_back(startLaunched({"train", run + ".toml", "-q", "--overwrite", "--set", "train.epochs=200"},
                                   torchrun(r, 3, port), dir / ("rank" + std::to_string(r) + ".log")));
    REQUIRE(waitFor([&] { return !stepDirs(run).empty(); }, 60));
    auto t0 = std::chrono::steady_clock::now();
    ::kill(pids[static_cast<size_t>(victim)], SIGKILL);
    for (int r = 0; r < 3; ++r) {
      int code = waitExit(pids[static_cast<size_t>(r)]);
      if (r == victim) continue;
      std::string log = readFile(dir / ("rank" + std::to_string(r) + ".log"));
      INFO("rank ", r, ": ", log);
      CHECK(code != 0);
      CHECK(lineCount(log) >= 1);
      CHECK(log.find("dtrain: ") != std::string::npos);
    }
    CHECK(secondsSince(t0) < 15.0);
  }
}

TEST_CASE("launcher variables with a job that cannot run as several processes: one line, exit 2") {
  TempDir dir("launch_config");
  std::string run = dir / "run";
  SUBCASE("one_device") {
    writeFile(run + ".toml", job(run, ""));
    Finished f = runLaunched({"train", run + ".toml"}, {torchrun(1, 2, freePort())}, dir)[0];
    CHECK(f.exit_code == 2);
    CHECK(lineCount(f.log) == 1);
    CHECK(f.log.find("torchrun started 2 processes but the job's [strategy] type is 'one_device'") !=
          std::string::npos);
  }
  SUBCASE("mpirun without a coordinator") {
    writeFile(run + ".toml", job(run, mirrored(2)));
    Env mpi = {
        {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
    Finished f = runLaunched({"train", run + ".toml"}, {mpi}, dir)[0];
    CHECK(f.exit_code == 2);
    CHECK(lineCount(f.log) == 1);
    CHECK(f.log.find("set [cluster] coordinator = \"host:port\"") != std::string::npos);
  }
  SUBCASE("a world size of 1 runs as without a launcher") {
    writeFile(run + ".toml", job(run, ""));
    Finished f =
        runLaunched({"train", run + ".toml", "-q", "--set", "train.epochs=1"}, {slurm(0, 1)}, dir)[0];
    INFO(f.log);
    CHECK(f.exit_code == 0);
    CHECK(!stepDirs(run).empty());
  }
}
