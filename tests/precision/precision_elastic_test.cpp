// fp16 in an elastic run: a worker killed mid-run, the survivors re-form
// and take the chief's loss scale with its weights, and an overflow after
// the regroup is skipped by all of them alike.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>
#include <sstream>

#include "tests/elastic/elastic_run.h"

using namespace dtrain::testing;

namespace {

constexpr int kSteps = 210;  // 10 epochs of 21 steps

std::string fp16Job(const std::string& run_dir, bool elastic) {
  std::string job = oneThread(smallJob(run_dir, "[strategy]\ntype = \"mirrored\"\nworkers = 3\n")) +
                    (elastic ? "[cluster]\nelastic = true\n" : "");
  job.replace(job.find("[job]\n"), 6, "[job]\nprecision = \"fp16\"\n");
  return job;
}

// A constant learning rate: the reference's first leg stops early (train.steps),
// which would move a cosine schedule's course.
std::vector<std::string> trainArgs(const std::string& job) {
  return {"train", job, "-q", "--set", "train.steps=" + std::to_string(kSteps), "--set",
          "train.loss_scale_growth_interval=50", "--set", "schedule.type=constant",
          "--fault-overflow-at-step", "150"};
}

// The last train line's value of `key` in a run's metrics.jsonl.
double lastTrainValue(const std::string& run_dir, const std::string& key) {
  std::istringstream in(readFile(run_dir + "/metrics.jsonl"));
  double value = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"split\":\"train\"") == std::string::npos) continue;
    const size_t at = line.find("\"" + key + "\":");
    if (at != std::string::npos) value = std::atof(line.c_str() + at + key.size() + 3);
  }
  return value;
}

}  // namespace

TEST_CASE("fp16, elastic: kill -9 of one of 3 workers; the survivors keep one loss scale and skip alike") {
  TempDir dir("fp16_elastic");
  writeFile(dir / "job.toml", fp16Job(dir / "run", true));
  writeFile(dir / "reference.toml", fp16Job(dir / "reference", false));
  const pid_t host = startDtrain(trainArgs(dir / "job.toml"), dir / "run.log");
  const bool checkpointed = waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60);
  INFO("run: " << readFile(dir / "run.log"));
  REQUIRE(checkpointed);
  REQUIRE(::kill(workerOf(host, 2), SIGKILL) == 0);
  const int code = waitExit(host);
  CAPTURE(readFile(dir / "run.log"));
  REQUIRE(code == 0);
  checkEveryStepOnce(readElasticLog(dir / "run"), kSteps);
  REQUIRE(readElasticLog(dir / "run").generations.size() == 1);

  // The reference: 3 workers up to the step the group re-formed at, then a
  // resume on 2, as the survivors went on. The same sums in the same order:
  // the same bits, the loss scale's history included.
  const std::string log = readFile(dir / "run.log");
  const std::string marker = "re-forming the group at step ";
  const size_t at = log.find(marker);
  REQUIRE(at != std::string::npos);
  const int regrouped = std::atoi(log.c_str() + at + marker.size());
  CAPTURE(regrouped);
  std::vector<std::string> first = trainArgs(dir / "reference.toml");
  first[4] = "train.steps=" + std::to_string(regrouped);
  const RunResult before = runDtrain(first);
  REQUIRE_MESSAGE(before.exit_code == 0, before.output);
  const RunResult after = runDtrain({"resume", dir / "reference", "-q", "--set", "strategy.workers=2", "--set",
                                     "train.steps=" + std::to_string(kSteps), "--fault-overflow-at-step", "150"});
  REQUIRE_MESSAGE(after.exit_code == 0, after.output);
  // The same decisions: 65536, x2 at steps 50, 100; halved at 150; x2 at 200.
  CHECK(lastTrainValue(dir / "run", "skipped_steps") == 1);
  CHECK(lastTrainValue(dir / "reference", "skipped_steps") == 1);
  CHECK(lastTrainValue(dir / "run", "loss_scale") == 262144);
  CHECK(lastTrainValue(dir / "reference", "loss_scale") == 262144);
  const std::string last = "/checkpoints/" + stepDirName(kSteps);
  CHECK(checkpointDifference(dir / "run" + last, dir / "reference" + last, "model.safetensors") == 0);
  CHECK(checkpointDifference(dir / "run" + last, dir / "reference" + last, "optimizer.safetensors") == 0);
}
