// fp16 in an elastic run: a worker killed mid-run, the survivors re-form
// and take the chief's loss scale with its weights, and an overflow after
// the regroup is skipped by all of them alike.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
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

std::vector<std::string> trainArgs(const std::string& job) {
  return {"train", job, "-q", "--set", "train.steps=" + std::to_string(kSteps), "--set",
          "train.loss_scale_growth_interval=50", "--fault-overflow-at-step", "150"};
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

  const RunResult whole = runDtrain(trainArgs(dir / "reference.toml"));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  // The same decisions: 65536, x2 at steps 50, 100; halved at 150; x2 at 200.
  CHECK(lastTrainValue(dir / "run", "skipped_steps") == 1);
  CHECK(lastTrainValue(dir / "reference", "skipped_steps") == 1);
  CHECK(lastTrainValue(dir / "run", "loss_scale") == 262144);
  CHECK(lastTrainValue(dir / "reference", "loss_scale") == 262144);
  // Two workers sum the gradients in another order than three: fp32
  // masters differ in their last bits, and one near the middle of two fp16
  // values rounds to the other (2^-11 of it), which moves AdamW's update by
  // at most lr x 2u a step: at most kSteps x 0.003 x 2 x 2^-11 = 6.2e-4,
  // relative to the largest weight.
  const std::string last = "/checkpoints/" + stepDirName(kSteps);
  double largest = 0;
  for (const auto& t : dtrain::readSafetensors(dir / "reference" + last + "/model.safetensors").tensors)
    for (float v : t.data) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  const double diff = checkpointDifference(dir / "run" + last, dir / "reference" + last, "model.safetensors");
  CAPTURE(diff);
  CHECK(diff <= kSteps * 0.003 * 2 * std::ldexp(1.0, -11) / largest);
}
