// `dtrain train` started once per task with TF_CONFIG, as an orchestrator
// starts TensorFlow's tasks: the chief serves the rendezvous on its port, the
// workers join, and the run trains what mirrored trains; tasks dtrain does
// not start from TF_CONFIG are refused in one line.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <string>

#include "tests/common/free_port.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

std::string tfConfig(int chief_port, int worker_port, const std::string& type) {
  return "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(chief_port) +
         "\"], \"worker\": [\"127.0.0.1:" + std::to_string(worker_port) + "\"]}, \"task\": {\"type\": \"" +
         type + "\", \"index\": 0}}";
}

const char* const kFromTfConfig =
    "[strategy]\ntype = \"multi_worker_mirrored\"\n"
    "[cluster]\nfrom = \"tf_config\"\ntoken = \"s3cret\"\n";

}  // namespace

TEST_CASE("train from TF_CONFIG: a chief and a worker task train as mirrored's 2 workers do") {
  TempDir dir("tfconfig_train");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", kFromTfConfig)));
  writeFile(dir / "mirrored.toml",
            oneThread(smallJob(dir / "mirrored", "[strategy]\ntype = \"mirrored\"\nworkers = 2\n")));
  REQUIRE(runDtrain({"train", dir / "mirrored.toml", "-q", "--set", "train.steps=14"}).exit_code == 0);
  const int chief_port = freePort(), worker_port = freePort();
  const pid_t worker =
      startDtrain({"train", dir / "job.toml", "-q", "--set", "train.steps=14"}, dir / "worker.log",
                  [&] { ::setenv("TF_CONFIG", tfConfig(chief_port, worker_port, "worker").c_str(), 1); });
  const RunResult chief = runDtrain({"train", dir / "job.toml", "-q", "--set", "train.steps=14"},
                                    "TF_CONFIG='" + tfConfig(chief_port, worker_port, "chief") + "'");
  INFO(chief.output);
  INFO(readFile(dir / "worker.log"));
  CHECK(chief.exit_code == 0);
  CHECK(waitExit(worker) == 0);
  CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "mirrored/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}

TEST_CASE("train from TF_CONFIG: a parameter-server job's chief, worker and ps tasks train as dtrain's do") {
  // A TF_CONFIG written for TensorFlow's ParameterServerStrategy: the ps task
  // becomes the shard (the last rank), the chief and the worker the workers.
  TempDir dir("tfconfig_ps");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", kFromTfConfig)));
  writeFile(dir / "mirrored.toml",
            oneThread(smallJob(dir / "mirrored", "[strategy]\ntype = \"mirrored\"\nworkers = 2\n")));
  REQUIRE(runDtrain({"train", dir / "mirrored.toml", "-q", "--set", "train.steps=14"}).exit_code == 0);
  const int chief_port = freePort(), worker_port = freePort(), ps_port = freePort();
  auto tfConfigOf = [&](const std::string& type) {
    return "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(chief_port) +
           "\"], \"worker\": [\"127.0.0.1:" + std::to_string(worker_port) +
           "\"], \"ps\": [\"127.0.0.1:" + std::to_string(ps_port) + "\"]}, \"task\": {\"type\": \"" + type +
           "\", \"index\": 0}}";
  };
  const std::vector<std::string> args = {"train", dir / "job.toml", "--set", "train.steps=14"};
  const pid_t ps =
      startDtrain(args, dir / "ps.log", [&] { ::setenv("TF_CONFIG", tfConfigOf("ps").c_str(), 1); });
  const pid_t worker =
      startDtrain(args, dir / "worker.log", [&] { ::setenv("TF_CONFIG", tfConfigOf("worker").c_str(), 1); });
  const RunResult chief = runDtrain(args, "TF_CONFIG='" + tfConfigOf("chief") + "'");
  INFO(chief.output);
  INFO(readFile(dir / "worker.log"));
  INFO(readFile(dir / "ps.log"));
  CHECK(chief.exit_code == 0);
  CHECK(waitExit(worker) == 0);
  CHECK(waitExit(ps) == 0);
  CHECK(chief.output.find("2 workers, parameters on 1 shard(s), synchronous updates") != std::string::npos);
  CHECK(readFile(dir / "ps.log").find("parameter server: shard 0: 14 updates applied (sync)") !=
        std::string::npos);
  CHECK(checkpointDifference(dir / "run/checkpoints/latest", dir / "mirrored/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}

TEST_CASE("train from TF_CONFIG refuses an evaluator task in one line") {
  TempDir dir("tfconfig_evaluator");
  writeFile(dir / "job.toml", smallJob(dir / "run", kFromTfConfig));
  const std::string cluster =
      "TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:2222\"], \"ps\": [\"127.0.0.1:2224\"], "
      "\"evaluator\": [\"127.0.0.1:2225\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}'";
  const RunResult r = runDtrain({"train", dir / "job.toml"}, cluster);
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("which trains nothing: dtrain starts only chief, worker and ps tasks") !=
        std::string::npos);
}
