#include "core/launch/worker_processes.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "core/errors.h"
#include "core/util/process_memory.h"
#include "core/util/process_state.h"

extern char** environ;

namespace dtrain {
namespace {

// Set by the handler; read by wait(). Forwarding happens on the main thread,
// outside the handler.
volatile sig_atomic_t g_forward_signal = 0;

extern "C" void rememberSignal(int sig) { g_forward_signal = sig; }

std::vector<std::string> environmentWith(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) vars[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// The system's out-of-memory kills when this process started (/proc/vmstat).
int64_t oomKillsAtStart() {
  static const int64_t at_start = oomKillCount();
  return at_start;
}
const int64_t g_oom_kills_read_at_start = oomKillsAtStart();

}  // namespace

std::string describeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    std::string text =
        "was killed by signal " + std::to_string(sig) + (abbrev ? " (SIG" + std::string(abbrev) + ")" : "");
    // The kernel's out-of-memory killer sends SIGKILL and counts its kills.
    if (sig == SIGKILL && oomKillCount() > oomKillsAtStart())
      text +=
          ", by the kernel's out-of-memory killer (a memory cgroup's limit or the host's memory): `dtrain "
          "check` predicts each worker's memory; [strategy] type = \"sharded\" keeps 1/N of the training "
          "state (stage = 3: of the parameters too)";
    return text;
  }
  return "ended with wait status " + std::to_string(status);
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

WorkerProcesses::WorkerProcesses(std::chrono::milliseconds grace) : grace_(grace) {}

WorkerProcesses::~WorkerProcesses() {
  stopAll(SIGKILL);
  reapAll(std::chrono::seconds(5));
}

std::vector<pid_t> WorkerProcesses::pids() const {
  std::vector<pid_t> p;
  for (const Child& c : children_) p.push_back(c.pid);
  return p;
}

void WorkerProcesses::start(const std::vector<WorkerLaunch>& workers) {
  // The host process only relays stop signals; the workers decide together
  // when to stop (after a checkpoint).
  struct sigaction sa {};
  sa.sa_handler = rememberSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (const WorkerLaunch& w : workers) {
    std::vector<std::string> args = w.argv, env = environmentWith(w.env);
    std::vector<char*> argp = pointers(args), envp = pointers(env);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args.at(0).c_str(), nullptr, nullptr, argp.data(), envp.data());
    if (rc != 0) {
      stopAll(SIGKILL);
      reapAll(std::chrono::seconds(5));
      throw Error("cannot start worker " + w.label + " (" + args[0] + "): " + std::strerror(rc));
    }
    children_.push_back(Child{w.label, w.survivable, pid, true, 0});
  }
}

bool WorkerProcesses::anyEndedCleanly() const {
  for (const Child& c : children_)
    if (!c.running && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0) return true;
  return false;
}

void WorkerProcesses::killStopped() {
  for (const Child& c : children_) {
    const char state = c.running ? processState(c.pid) : '\0';
    if (state == 'T' || state == 't') ::kill(c.pid, SIGKILL);
  }
}

void WorkerProcesses::kill(size_t index) {
  if (index < children_.size() && children_[index].running) ::kill(children_[index].pid, SIGKILL);
}

void WorkerProcesses::stopAll(int sig) {
  for (Child& c : children_)
    if (c.running) ::kill(c.pid, sig);
}

void WorkerProcesses::endAll() {
  stopAll(SIGTERM);
  // A frozen worker (SIGSTOP) cannot act on SIGTERM: it would only be killed
  // when the grace runs out. The run has failed already; kill it now.
  killStopped();
  reapAll(grace_);
  stopAll(SIGKILL);
  reapAll(std::chrono::seconds(5));
}

void WorkerProcesses::reapAll(std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    bool any = false;
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.running = false;
        c.status = status;
      } else {
        any = true;
      }
    }
    if (!any || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

namespace {

// How long a failed run's host looks for a worker killed by a signal before it
// blames the worker that reported the loss.
constexpr std::chrono::milliseconds kKilledWorkerLook{300};

}  // namespace

WorkersOutcome WorkerProcesses::wait(const std::function<std::string()>& poll,
                                     const std::function<void(size_t, const std::string&)>& survived) {
  WorkersOutcome out;
  int forwarded = 0;
  auto failureOf = [](const Child& c) {
    return c.label + " (pid " + std::to_string(c.pid) + ") " + describeExit(c.status);
  };
  // The run has failed: a worker exited with an error, or a peer's abort
  // reached the coordinator. A worker killed by a signal is the cause (its
  // peers failed or aborted because it was gone), so it is named instead; its
  // peers may notice its exit a moment before it can be reaped, hence a short
  // look. Then the others are ended: they would otherwise wait for the lost
  // peer until the collective deadline.
  auto fail = [&](std::string failure, int exit_code) {
    const auto until = std::chrono::steady_clock::now() + kKilledWorkerLook;
    while (exit_code < 128) {
      for (Child& c : children_) {
        int status = 0;
        if (!c.running || waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
        c.running = false;
        c.status = status;
        if (WIFSIGNALED(status) && exit_code < 128) {
          failure = failureOf(c);
          exit_code = exitCodeOf(status);
        }
      }
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    out.failure = std::move(failure);
    out.exit_code = exit_code;
    endAll();
    return out;
  };
  for (;;) {
    if (g_forward_signal && g_forward_signal != forwarded) {
      forwarded = g_forward_signal;
      stopAll(forwarded);
    }
    bool any_running = false;
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == 0) {
        any_running = true;
        continue;
      }
      c.running = false;
      c.status = status;
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && c.survivable && !forwarded) {
        if (survived) survived(static_cast<size_t>(&c - children_.data()), failureOf(c));
        continue;
      }
      // A worker stopped by the relayed signal (exit 128+sig after its
      // checkpoint) is not a failure of the run's machinery.
      bool relayed_stop = forwarded && exitCodeOf(status) == 128 + forwarded;
      if (failed && out.failure.empty()) {
        out.exit_code = exitCodeOf(status);
        if (!relayed_stop) return fail(failureOf(c), exitCodeOf(status));
      }
    }
    if (!any_running) return out;
    if (poll) {
      std::string reason = poll();
      if (!reason.empty()) return fail(reason, 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace dtrain
