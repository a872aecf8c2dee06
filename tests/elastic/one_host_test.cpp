// In-job recovery on one host: a [cluster] holding only `elastic = true`
// leaves the job on one host (its workers meet over loopback) and recovers
// it there. Needs no network namespaces.
#include <doctest/doctest.h>

#include <csignal>

#include "tests/elastic/elastic_run.h"

using namespace dtrain::testing;

namespace {

constexpr int kSteps = 420;  // 20 epochs of 21 steps

std::string threeWorkerJob(const std::string& run_dir, bool elastic) {
  return oneThread(smallJob(run_dir, "[strategy]\ntype = \"mirrored\"\nworkers = 3\n")) +
         (elastic ? "[cluster]\nelastic = true\n" : "");
}

std::vector<std::string> trainSteps(const std::string& job) {
  return {"train", job, "-q", "--set", "train.steps=" + std::to_string(kSteps)};
}

}  // namespace

TEST_CASE("elastic on one host: kill -9 of one of 3 workers; the 2 others finish the run") {
  TempDir dir("elastic_one_host");
  writeFile(dir / "job.toml", threeWorkerJob(dir / "run", true));
  writeFile(dir / "reference.toml", threeWorkerJob(dir / "reference", false));

  const pid_t host = startDtrain(trainSteps(dir / "job.toml"), dir / "run.log");
  const bool checkpointed = waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60);
  INFO("run: " << readFile(dir / "run.log"));
  REQUIRE(checkpointed);
  const pid_t victim = workerOf(host, 2);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const int code = waitExit(host);
  const std::string log = readFile(dir / "run.log");
  CAPTURE(log);
  CHECK(code == 0);
  CHECK(log.find("done: step " + std::to_string(kSteps) + ",") != std::string::npos);

  const ElasticLog metrics = readElasticLog(dir / "run");
  checkEveryStepOnce(metrics, kSteps);
  REQUIRE(metrics.generations.size() == 1);
  const std::string& line = metrics.generations.front();
  CAPTURE(line);
  CHECK(line.find("\"world_size\":2") != std::string::npos);
  CHECK(line.find("lost rank 2") != std::string::npos);
  CHECK(line.find("pid " + std::to_string(victim)) != std::string::npos);

  // The same global batches as 3 workers that all finish: equal within float tolerance.
  const RunResult whole = runDtrain(trainSteps(dir / "reference.toml"));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  checkSameFinalWeights(dir / "run", dir / "reference", kSteps);
}
