// In-job recovery on one host: a [cluster] holding only `elastic = true`
// leaves the job on one host (its workers meet over loopback) and recovers
// it there. Needs no network namespaces.
#include <doctest/doctest.h>

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

  const KilledWorker killed = killWorkerAndFinish(dir, trainSteps(dir / "job.toml"), kSteps, 2);
  CAPTURE(killed.generation);
  CHECK(killed.generation.find("\"world_size\":2") != std::string::npos);
  CHECK(killed.generation.find("lost rank 2") != std::string::npos);
  CHECK(killed.generation.find("pid " + std::to_string(killed.pid)) != std::string::npos);

  // The same global batches as 3 workers that all finish: equal within float tolerance.
  const RunResult whole = runDtrain(trainSteps(dir / "reference.toml"));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  checkSameFinalWeights(dir / "run", dir / "reference", kSteps);
}
