// `dtrain check` under TF_CONFIG: the roles it derived, one line per task,
// and a bad TF_CONFIG as one line with exit code 2.
#include <doctest/doctest.h>

#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// A synthetic-data job that takes its cluster from TF_CONFIG.
const char* const kTfConfigJob =
    "[model]\npreset = \"mlp\"\n[data]\ndataset = \"synthetic\"\n"
    "[strategy]\ntype = \"multi_worker_mirrored\"\n"
    "[cluster]\nfrom = \"tf_config\"\ntoken = \"s3cret\"\n";

// A TensorFlow parameter-server job's TF_CONFIG for `task`.
std::string psJobTfConfig(const std::string& task) {
  return "TF_CONFIG='{\"cluster\": {\"chief\": [\"c0:2222\"], \"worker\": [\"w0:2222\", \"w1:2222\"], "
         "\"ps\": [\"p0:2222\"], \"evaluator\": [\"e0:2222\"]}, \"task\": " +
         task + "}'";
}

}  // namespace

TEST_CASE("check prints the roles it derived from TF_CONFIG") {
  TempDir tmp("tfconfig");
  const std::string job = tmp.write("job.toml", kTfConfigJob);
  RunResult r = runDtrain({"check", job}, psJobTfConfig("{\"type\": \"worker\", \"index\": 1}"));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("# TF_CONFIG: this process is worker 1, dtrain rank 2 of 3\n"
                      "#   chief 0      c0:2222  rank 0 (coordinator)\n"
                      "#   worker 0     w0:2222  rank 1\n"
                      "#   worker 1     w1:2222  rank 2                    <- this process\n"
                      "#   ps 0         p0:2222  parameter-server shard 0\n"
                      "#   evaluator 0  e0:2222  evaluator\n"
                      "# TF_CONFIG as a dtrain job: strategy parameter_server "
                      "in place of the job's multi_worker_mirrored, coordinator c0:2222, hosts "
                      "\"c0:1,w0:1,w1:1,p0:1\", 1 parameter-server shard, an evaluator\n") !=
        std::string::npos);

  // Without a chief, worker 0 coordinates; the job's strategy is the one implied.
  r = runDtrain(
      {"check", job},
      "TF_CONFIG='{\"cluster\": {\"worker\": [\"10.0.0.1:2222\", \"10.0.0.1:2223\", \"10.0.0.2:2222\"]}, "
      "\"task\": {\"type\": \"worker\", \"index\": 0}}'");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("# TF_CONFIG: this process is worker 0, dtrain rank 0 of 3 (coordinator)\n") !=
        std::string::npos);
  CHECK(
      r.output.find("# TF_CONFIG as a dtrain job: strategy multi_worker_mirrored, coordinator 10.0.0.1:2222, "
                    "hosts \"10.0.0.1:2,10.0.0.2:1\"\n") != std::string::npos);
}

TEST_CASE("check without TF_CONFIG prints no roles, and from = \"job\" ignores TF_CONFIG") {
  TempDir tmp("tfconfig2");
  const std::string job =
      tmp.write("job.toml", "[model]\npreset = \"mlp\"\n[data]\ndataset = \"synthetic\"\n");
  RunResult r = runDtrain({"check", job});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("TF_CONFIG") == std::string::npos);
  const std::string tf_config = psJobTfConfig("{\"type\": \"ps\", \"index\": 0}");
  r = runDtrain({"check", job}, tf_config);  // the default: TF_CONFIG is read when set
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("# TF_CONFIG: this process is ps 0, parameter-server shard 0 of 1\n") !=
        std::string::npos);
  r = runDtrain(
      {"check", job, "--set", "cluster.from=job", "--set", "strategy.type=multi_worker_mirrored", "--set",
       "cluster.coordinator=a:1", "--set", "cluster.token=t", "--set", "cluster.hosts=a:2"},
      tf_config);
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("# TF_CONFIG") == std::string::npos);
}

TEST_CASE("check with a bad TF_CONFIG is one line naming the field, exit code 2") {
  TempDir tmp("tfconfig3");
  const std::string job = tmp.write("job.toml", kTfConfigJob);
  RunResult r = runDtrain({"check", job}, psJobTfConfig("{\"type\": \"worker\", \"index\": 2}"));
  CHECK(r.exit_code == 2);
  CHECK(
      r.output ==
      "dtrain: error: TF_CONFIG: task.index 2 is out of range: cluster.worker lists 2 addresses (0 to 1)\n");
  r = runDtrain({"check", job}, "TF_CONFIG='not json'");
  CHECK(r.exit_code == 2);
  CHECK(r.output == "dtrain: error: TF_CONFIG is not JSON: byte 0: unexpected 'n', expected a JSON value\n");
  r = runDtrain({"check", job});  // from = "tf_config" without TF_CONFIG
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("job.toml:8:8: [cluster] from = \"tf_config\" needs TF_CONFIG in the environment") !=
        std::string::npos);
}
