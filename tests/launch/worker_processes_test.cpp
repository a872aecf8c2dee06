#include "core/launch/worker_processes.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>

#include "core/errors.h"

using namespace dtrain;

namespace {

// Long-running scripts `exec` their sleep: a shell's orphaned child would
// outlive the kill and hold the test runner's output pipe open.
WorkerLaunch shell(const std::string& label, const std::string& script) {
  return WorkerLaunch{label, {"/bin/sh", "-c", script}, {}};
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("workers: all succeed -> exit 0, no failure") {
  WorkerProcesses w;
  w.start({shell("rank 0", "exit 0"), shell("rank 1", "sleep 0.1; exit 0")});
  WorkersOutcome out = w.wait();
  CHECK(out.exit_code == 0);
  CHECK(out.failure.empty());
}

TEST_CASE("workers: the environment reaches the worker") {
  WorkerProcesses w;
  w.start({WorkerLaunch{
      "rank 0", {"/bin/sh", "-c", "test \"$DTRAIN_TEST_VALUE\" = 42"}, {{"DTRAIN_TEST_VALUE", "42"}}}});
  CHECK(w.wait().exit_code == 0);
}

TEST_CASE("workers: one killed -> named, the others ended at once") {
  WorkerProcesses w(std::chrono::milliseconds(2000));
  auto t0 = std::chrono::steady_clock::now();
  w.start({shell("rank 0 (node 0, slot 0)", "exec sleep 30"),
           shell("rank 1 (node 0, slot 1)", "sleep 0.2; kill -9 $$"),
           shell("rank 2 (node 0, slot 2)", "exec sleep 30")});
  WorkersOutcome out = w.wait();
  CHECK(secondsSince(t0) < 5.0);
  CHECK(out.exit_code == 137);
  CHECK(out.failure.find("rank 1 (node 0, slot 1) (pid ") == 0);
  CHECK(out.failure.find("was killed by signal 9 (SIGKILL)") != std::string::npos);
  for (pid_t p : w.pids()) CHECK(::kill(p, 0) != 0);  // reaped: no such process
}

TEST_CASE("workers: a failing exit status is reported with its code") {
  WorkerProcesses w(std::chrono::milliseconds(2000));
  w.start({shell("rank 0", "exit 3"), shell("rank 1", "exec sleep 30")});
  WorkersOutcome out = w.wait();
  CHECK(out.exit_code == 3);
  CHECK(out.failure.find("exited with status 3") != std::string::npos);
}

TEST_CASE("workers: a worker ignoring SIGTERM is killed after the grace period") {
  WorkerProcesses w(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  w.start({shell("rank 0", "exit 1"), shell("rank 1", "trap '' TERM; exec sleep 30")});
  WorkersOutcome out = w.wait();
  CHECK(out.exit_code == 1);
  CHECK(secondsSince(t0) < 5.0);
}

TEST_CASE("workers: a poll reason stops everything") {
  WorkerProcesses w(std::chrono::milliseconds(2000));
  auto t0 = std::chrono::steady_clock::now();
  w.start({shell("rank 0", "exec sleep 30"), shell("rank 1", "exec sleep 30")});
  int calls = 0;
  WorkersOutcome out =
      w.wait([&] { return ++calls == 3 ? std::string("lost rank 5 (host b)") : std::string(); });
  CHECK(out.failure == "lost rank 5 (host b)");
  CHECK(out.exit_code != 0);
  CHECK(secondsSince(t0) < 5.0);
}

TEST_CASE("workers: a program that does not exist is an Error naming it") {
  WorkerProcesses w;
  CHECK_THROWS_WITH_AS(w.start({WorkerLaunch{"rank 0", {"/nonexistent/dtrain"}, {}}}),
                       doctest::Contains("cannot start worker rank 0 (/nonexistent/dtrain)"), Error);
}
