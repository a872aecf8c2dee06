// A cluster of network namespaces for one test (scripts/netns-cluster.sh): each
// "host" has its own address on a private bridge, so dtrain runs as it would
// on several machines, and a host can be killed on its own. Up in the
// constructor, down in the destructor (which also kills and reaps whatever
// still runs in it), so a failing test leaves nothing behind.
#pragma once
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/train/run_helpers.h"

namespace dtrain::testing {

class NetnsCluster {
 public:
  // Brings up `hosts` namespaces; when this machine cannot (not root, no
  // `ip`, no namespaces) available() is false and whyUnavailable() says why.
  explicit NetnsCluster(int hosts) {
    static int made = 0;
    // Each cluster's bridge is private to it, so only the names have to be
    // unique: the pid and a count keep a leftover of a killed run out of the way.
    prefix_ = "dtrain-test-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    removeLeftovers();
    RunResult up = script({"up", std::to_string(hosts)});
    if (up.exit_code == kCannotRunHere) {
      why_ = up.output.substr(0, up.output.find('\n'));
      return;
    }
    if (up.exit_code != 0) throw std::runtime_error("netns-cluster.sh up failed: " + up.output);
    up_ = true;
  }

  ~NetnsCluster() {
    if (up_) script({"down"});
    for (pid_t pid : started_) {  // killed by down; reap them
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  bool available() const { return up_; }
  // The namespaces' name prefix (netns-cluster.sh --prefix).
  const std::string& prefix() const { return prefix_; }
  static std::string scriptPath() { return std::string(DTRAIN_SOURCE_DIR) + "/scripts/netns-cluster.sh"; }
  const std::string& whyUnavailable() const { return why_; }
  // Host i's address (the script's default subnet).
  static std::string address(int host) { return "10.77.0." + std::to_string(host + 1); }

  // Starts `dtrain ARGS...` in host i with its output to `log`; returns its pid
  // (dtrain's own: every step of the script execs).
  pid_t start(int host, const std::vector<std::string>& dtrain_args, const std::string& log) {
    std::vector<std::string> argv = {scriptPath(), "--prefix",           prefix_,
                                     "exec",       std::to_string(host), DTRAIN_BINARY};
    argv.insert(argv.end(), dtrain_args.begin(), dtrain_args.end());
    std::fflush(nullptr);  // the child must not repeat buffered output
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      (void)f;
      ::dup2(::fileno(stdout), 2);
      std::vector<char*> p;
      for (std::string& a : argv) p.push_back(a.data());
      p.push_back(nullptr);
      ::execv(p[0], p.data());
      std::_Exit(127);
    }
    started_.push_back(pid);
    return pid;
  }

  // Waits for a pid from start(); its exit code (128 + signal), or -1 when it
  // is still running after `seconds`.
  int wait(pid_t pid, double seconds) {
    int status = 0;
    bool done = waitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, seconds);
    if (!done) return -1;
    started_.erase(std::remove(started_.begin(), started_.end(), pid), started_.end());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Runs `dtrain ARGS...` in host i to the end; its exit code.
  int run(int host, const std::vector<std::string>& dtrain_args, const std::string& log, double seconds) {
    return wait(start(host, dtrain_args, log), seconds);
  }

  // The pids of every process in host i.
  std::vector<pid_t> pids(int host) const {
    std::vector<pid_t> out;
    std::istringstream in(script({"pids", std::to_string(host)}).output);
    for (long pid; in >> pid;) out.push_back(static_cast<pid_t>(pid));
    return out;
  }

  // Takes host i off the network (its link down): its processes live on, but
  // nothing reaches them, as when a host hangs or a cable is pulled.
  bool cutOff(int host) const {
    std::string cmd = "ip -n '" + prefix_ + "-h" + std::to_string(host) + "' link set eth0 down";
    return std::system(cmd.c_str()) == 0;
  }

  // kill -9 of every process in host i: the host is gone at once.
  void killHost(int host) {
    for (pid_t pid : pids(host)) ::kill(pid, SIGKILL);
  }

 private:
  static constexpr int kCannotRunHere = 77;

  RunResult script(const std::vector<std::string>& args) const {
    std::string cmd = scriptPath() + " --prefix " + prefix_;
    for (const std::string& a : args) cmd += " '" + a + "'";
    cmd += " 2>&1";
    RunResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

  // Clusters of test processes that no longer exist (killed before their
  // destructor ran) would pile up in `ip netns list`.
  static void removeLeftovers() {
    const std::string tag = "dtrain-test-";
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
      names.push_back(e.path().filename().string());
    for (const std::string& name : names) {
      if (name.rfind(tag, 0) != 0) continue;
      const std::string rest = name.substr(tag.size());  // "<pid>-<n>-h0" or "<pid>-<n>-net"
      const long pid = std::atol(rest.c_str());
      if (pid <= 0 || std::filesystem::exists("/proc/" + std::to_string(pid), ec)) continue;
      const size_t cut = name.rfind('-');
      std::string cmd = scriptPath() + " --prefix '" + name.substr(0, cut) + "' down >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) continue;  // best effort: names are unique anyway
    }
  }

  std::string prefix_;
  std::string why_;
  bool up_ = false;
  std::vector<pid_t> started_;
};

}  // namespace dtrain::testing
