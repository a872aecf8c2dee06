// scripts/launch-ssh.sh over a stand-in for ssh that runs the command in the
// namespace host whose address it is given: each host runs with its --node,
// its output comes back prefixed with its name, and a host that fails stops
// the others.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// `ssh [options] HOST COMMAND` for the cluster's hosts; any other host is unreachable.
std::string fakeSsh(const NetnsCluster& cluster) {
  return "#!/bin/sh\n"
         "eval \"host=\\${$(($# - 1))}\"\n"
         "eval \"command=\\${$#}\"\n"
         "case $host in\n"
         "  " +
         NetnsCluster::address(0) + ") i=0 ;;\n  " + NetnsCluster::address(1) +
         ") i=1 ;;\n"
         "  *) echo \"ssh: connect to host $host port 22: No route to host\" >&2; exit 255 ;;\n"
         "esac\n"
         "exec '" +
         NetnsCluster::scriptPath() + "' --prefix '" + cluster.prefix() + "' exec $i sh -c \"$command\"\n";
}

RunResult runCommand(const std::string& command) {
  RunResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace

TEST_CASE("launch-ssh.sh runs each host with its node, prefixes its output, stops the others on a failure") {
  NetnsCluster cluster(2);
  if (!cluster.available()) {
    MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return;
  }
  TempDir dir("multihost_ssh");
  writeFile(dir / "cluster.token", "token-of-this-test\n");
  writeFile(dir / "job.toml", twoHostJob(dir / "run", dir / "cluster.token"));
  writeFile(dir / "ssh", fakeSsh(cluster));
  ::chmod((dir / "ssh").c_str(), 0755);
  const std::string launch = std::string(DTRAIN_SOURCE_DIR) + "/scripts/launch-ssh.sh --ssh '" + dir / "ssh" +
                             "' --dtrain '" + DTRAIN_BINARY + "' --grace 10 '" + dir / "job.toml" + "' ";
  const std::string a = NetnsCluster::address(0), b = NetnsCluster::address(1);

  RunResult ok = runCommand(launch + a + " " + b + " -- -q --set train.epochs=2");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK(
      ok.output.find("[" + a + "] dtrain: coordinator: group formed: generation 1, 4 workers on 2 node(s)") !=
      std::string::npos);
  CHECK(ok.output.find("[" + a + "] done: step 42,") != std::string::npos);

  // Host 1 cannot be reached: host 0, waiting for its workers, is stopped.
  auto t0 = std::chrono::steady_clock::now();
  RunResult failed = runCommand(launch + a + " unreachable -- -q --overwrite --set train.epochs=2");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(failed.output);
  CHECK(failed.exit_code == 255);
  CHECK(took < 10);  // stopped, not hung up on after the grace period
  CHECK(failed.output.find("[unreachable] ssh: connect to host unreachable") != std::string::npos);
  CHECK(failed.output.find(
            "launch-ssh.sh: unreachable (node 1) failed with exit status 255; stopping the other "
            "hosts") != std::string::npos);
  CHECK(waitFor([&] { return cluster.pids(0).empty(); }, 5));
}
