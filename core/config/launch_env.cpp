#include "core/config/launch_env.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/config/host_port.h"
#include "core/config/value_text.h"
#include "core/errors.h"

namespace dtrain {
namespace {

// Reads one launcher's variables; every message starts with the launcher's name.
class EnvReader {
 public:
  EnvReader(const std::function<const char*(const char*)>& getenv_fn, std::string source)
      : getenv_(getenv_fn), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& msg) const {
    throw ConfigError(source_ + " environment: " + msg);
  }

  std::optional<std::string> get(const char* name) const {
    const char* v = getenv_(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  }
  bool has(const char* name) const { return get(name).has_value(); }

  // An integer >= min, or nullopt when unset.
  std::optional<int> optionalInt(const char* name, int min) const {
    std::optional<std::string> text = get(name);
    if (!text) return std::nullopt;
    return parseInt(name, *text, min);
  }
  // The same, for a variable the launcher always sets; `because` names what showed the launcher.
  int requiredInt(const char* name, int min, const char* because) const {
    std::optional<int> v = optionalInt(name, min);
    if (!v) fail(std::string(name) + " is not set (" + because + ")");
    return *v;
  }

  int parseInt(const std::string& name, const std::string& text, int min) const {
    bool digits = !text.empty() && text.size() <= 9;  // 9 digits always fit an int
    for (char c : text) digits = digits && c >= '0' && c <= '9';
    if (!digits || std::atoi(text.c_str()) < min)
      fail(name + " must be an integer >= " + std::to_string(min) + " (got " + quoteString(text) + ")");
    return std::atoi(text.c_str());
  }

  const std::string& source() const { return source_; }

 private:
  const std::function<const char*(const char*)>& getenv_;
  std::string source_;
};

// The checks every launcher's numbers must pass.
void checkRanks(const EnvReader& env, const LaunchEnv& out, const char* rank, const char* size,
                const char* local_rank, const char* local_size) {
  auto pair = [](const char* a, int x, const char* b, int y) {
    return " (got " + std::string(a) + "=" + std::to_string(x) + ", " + b + "=" + std::to_string(y) + ")";
  };
  if (out.rank >= out.world_size)
    env.fail(std::string(rank) + " must be < " + size + pair(rank, out.rank, size, out.world_size));
  if (out.local_world_size > out.world_size)
    env.fail(std::string(local_size) + " must be <= " + size +
             pair(local_size, out.local_world_size, size, out.world_size));
  if (out.local_world_size > 0 && out.local_rank >= out.local_world_size)
    env.fail(std::string(local_rank) + " must be < " + local_size +
             pair(local_rank, out.local_rank, local_size, out.local_world_size));
  if (out.local_rank >= out.world_size)
    env.fail(std::string(local_rank) + " must be < " + size +
             pair(local_rank, out.local_rank, size, out.world_size));
}

LaunchEnv readTorchrun(const EnvReader& env) {
  const char* because = "RANK and WORLD_SIZE are";
  LaunchEnv out;
  out.source = env.source();
  out.rank = env.requiredInt("RANK", 0, because);
  out.world_size = env.requiredInt("WORLD_SIZE", 1, because);
  out.local_rank = env.requiredInt("LOCAL_RANK", 0, because);
  out.local_world_size = env.optionalInt("LOCAL_WORLD_SIZE", 1).value_or(-1);
  // torchrun sets GROUP_RANK; NODE_RANK is what other launchers in that style use.
  std::optional<int> node = env.optionalInt("GROUP_RANK", 0);
  if (!node) node = env.optionalInt("NODE_RANK", 0);
  out.node = node.value_or(-1);
  checkRanks(env, out, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");

  std::optional<std::string> addr = env.get("MASTER_ADDR");
  std::optional<std::string> port = env.get("MASTER_PORT");
  if (addr.has_value() != port.has_value())
    env.fail(std::string(addr ? "MASTER_ADDR is set but MASTER_PORT is not"
                              : "MASTER_PORT is set but MASTER_ADDR is not") +
             "; set both or neither");
  if (addr) {
    // An IPv6 MASTER_ADDR may come with or without brackets.
    std::string host = *addr;
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    bool digits = port->size() <= 5 && port->find_first_not_of("0123456789") == std::string::npos;
    int p = digits ? std::atoi(port->c_str()) : 0;
    if (p < 1 || p > 65535)
      env.fail("MASTER_PORT must be a port in [1, 65535] (got " + quoteString(*port) + ")");
    out.coordinator = joinHostPort(host, p);
  }
  out.coordinator_port_taken = env.get("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  out.launch_id = env.get("TORCHELASTIC_RUN_ID").value_or("");
  return out;
}

LaunchEnv readOpenMpi(const EnvReader& env) {
  const char* because = "OMPI_COMM_WORLD_RANK is";
  LaunchEnv out;
  out.source = env.source();
  out.rank = env.requiredInt("OMPI_COMM_WORLD_RANK", 0, because);
  out.world_size = env.requiredInt("OMPI_COMM_WORLD_SIZE", 1, because);
  out.local_rank = env.requiredInt("OMPI_COMM_WORLD_LOCAL_RANK", 0, because);
  out.local_world_size = env.optionalInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(-1);
  checkRanks(env, out, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE");
  // Open MPI 4 names the job in an MCA variable; Open MPI 5 by its PMIx namespace.
  out.launch_id = env.get("OMPI_MCA_orte_ess_jobid").value_or(env.get("PMIX_NAMESPACE").value_or(""));
  return out;
}

// Slurm's tasks-per-node lists: "2(x3),1" = 2, 2, 2, 1.
std::vector<int> tasksPerNode(const EnvReader& env, const char* name, const std::string& text) {
  auto bad = [&] {
    env.fail(std::string(name) + " must be a list like \"2(x3),1\" (got " + quoteString(text) + ")");
  };
  std::vector<int> counts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    int repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') bad();
      std::string times = item.substr(paren + 2, item.size() - paren - 3);
      std::string count = item.substr(0, paren);
      bool ok =
          !times.empty() && times.size() <= 6 && times.find_first_not_of("0123456789") == std::string::npos;
      if (!ok) bad();
      repeat = std::atoi(times.c_str());
      item = count;
    }
    bool ok = !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
    if (!ok || repeat < 1 || std::atoi(item.c_str()) < 1) bad();
    counts.insert(counts.end(), repeat, std::atoi(item.c_str()));
    if (counts.size() > 1000000) bad();
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

// The job step's id; older Slurm names the variable SLURM_STEPID.
std::optional<std::string> slurmStepId(const EnvReader& env) {
  std::optional<std::string> step = env.get("SLURM_STEP_ID");
  return step ? step : env.get("SLURM_STEPID");
}

// Whether this process is a task of an srun job step. A batch script (sbatch)
// or an salloc shell has SLURM_PROCID=0 and SLURM_NTASKS=N too, without srun
// having started N tasks: taken for rank 0 of N there, `dtrain train` would
// wait for peers that never come. Only srun's tasks carry an ordinary step id;
// the batch script (4294967294), extern (4294967295), interactive (4294967290)
// and pending (4294967293) steps have ids near 2^32, and Slurm keeps the ids
// from 4294967280 up for such special steps. No step id, or one that is not a
// number, shows no srun step either.
bool inSrunStep(const EnvReader& env) {
  constexpr unsigned long long kFirstSpecialStepId = 4294967280ULL;
  std::optional<std::string> step = slurmStepId(env);
  if (!step || step->size() > 10 || step->find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoull(*step) < kFirstSpecialStepId;
}

LaunchEnv readSlurm(const EnvReader& env) {
  const char* because = "SLURM_PROCID is";
  LaunchEnv out;
  out.source = env.source();
  out.rank = env.requiredInt("SLURM_PROCID", 0, because);
  out.world_size = env.requiredInt("SLURM_NTASKS", 1, because);
  out.local_rank = env.requiredInt("SLURM_LOCALID", 0, because);
  out.node = env.optionalInt("SLURM_NODEID", 0).value_or(-1);
  // The step's actual layout first; SLURM_NTASKS_PER_NODE is only what was asked for.
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    std::optional<std::string> text = env.get(name);
    if (!text) continue;
    std::vector<int> counts = tasksPerNode(env, name, *text);
    if (out.node >= 0 && out.node < static_cast<int>(counts.size()))
      out.local_world_size = counts[out.node];
    else if (std::count(counts.begin(), counts.end(), counts[0]) == static_cast<long>(counts.size()))
      out.local_world_size = counts[0];  // the same on every node
    break;
  }
  checkRanks(env, out, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
             env.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_NTASKS_PER_NODE");
  // One allocation runs many steps (one per srun): the step tells them apart.
  if (std::optional<std::string> job = env.get("SLURM_JOB_ID")) {
    out.launch_id = *job;
    if (std::optional<std::string> step = slurmStepId(env)) out.launch_id += "." + *step;
  }
  return out;
}

}  // namespace

std::optional<LaunchEnv> detectLaunchEnv(const std::function<const char*(const char*)>& getenv_fn) {
  // Launchers nest, and the innermost one describes this process; an outer
  // one's variables are inherited and describe the launcher's own task.
  // - torchrun first: it is routinely started by srun or mpirun (one agent per
  //   node), so SLURM_PROCID / OMPI_COMM_WORLD_RANK there number the agents,
  //   not the workers; torchrun itself never starts Slurm or MPI tasks.
  // - then Open MPI: mpirun inside a Slurm allocation starts its processes
  //   with the allocation's SLURM_* (the batch shell's SLURM_PROCID=0, or one
  //   task per node for its daemons), which would give every process on a node
  //   the same rank. srun direct launch sets no OMPI_COMM_WORLD_* (Open MPI
  //   fills those in at MPI_Init, which dtrain does not call), so Slurm runs
  //   are not mistaken for mpirun.
  // - then Slurm, and only inside an srun job step (inSrunStep): the batch
  //   script or salloc shell that typed `dtrain train` is one process, not
  //   rank 0 of the allocation's tasks.
  EnvReader torchrun(getenv_fn, "torchrun");
  if (torchrun.has("RANK") && torchrun.has("WORLD_SIZE")) return readTorchrun(torchrun);
  EnvReader mpirun(getenv_fn, "mpirun");
  if (mpirun.has("OMPI_COMM_WORLD_RANK")) return readOpenMpi(mpirun);
  EnvReader slurm(getenv_fn, "slurm");
  if (slurm.has("SLURM_PROCID") && inSrunStep(slurm)) return readSlurm(slurm);
  return std::nullopt;
}

std::optional<LaunchEnv> detectLaunchEnv() {
  return detectLaunchEnv([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace dtrain
