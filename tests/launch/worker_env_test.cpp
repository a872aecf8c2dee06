// The variables a host's dtrain hands each worker: the assignment comes back
// whole on the worker's side and is then cleared, and OpenBLAS is held to one
// thread (each compute thread calls it single-threaded).
#include "core/launch/worker_env.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdlib>
#include <map>

namespace dtrain {
namespace {

WorkerAssignment sample() {
  WorkerAssignment a;
  a.coordinator = "tcp://10.0.0.1:29400";
  a.token = "s3cret";
  a.job_id = "job-1234";
  a.node = 1;
  a.slot = 3;
  a.local_workers = 4;
  a.address = "10.0.0.2";
  return a;
}

}  // namespace

TEST_CASE("worker environment: the assignment round-trips and is cleared after reading") {
  const WorkerAssignment sent = sample();
  const auto vars = workerEnvironment(sent);
  std::map<std::string, std::string> byName(vars.begin(), vars.end());
  CHECK(byName.size() == vars.size());  // no variable set twice
  CHECK(byName.at("OPENBLAS_NUM_THREADS") == "1");
  for (const auto& [name, value] : vars) ::setenv(name.c_str(), value.c_str(), 1);
  CHECK(startedAsWorker());

  const std::optional<WorkerAssignment> got = workerAssignmentFromEnv();
  REQUIRE(got.has_value());
  CHECK(got->coordinator == sent.coordinator);
  CHECK(got->token == sent.token);
  CHECK(got->job_id == sent.job_id);
  CHECK(got->node == 1);
  CHECK(got->slot == 3);
  CHECK(got->local_workers == 4);
  CHECK(got->address == sent.address);
  // Read once: a child of the worker is not taken for a worker.
  CHECK_FALSE(startedAsWorker());
  CHECK_FALSE(workerAssignmentFromEnv().has_value());
  ::unsetenv("OPENBLAS_NUM_THREADS");
}

}  // namespace dtrain
