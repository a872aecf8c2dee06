// Elastic recovery of a language model: a tiny GPT trained by 3 mirrored
// workers on one host loses one to kill -9; the 2 others finish the run, every
// step logged once, at the weights of an uninterrupted run of 3.
#include <doctest/doctest.h>

#include "tests/elastic/elastic_run.h"
#include "tests/train/gpt_jobs.h"

using namespace dtrain::testing;

TEST_CASE("elastic gpt: kill -9 of one of 3 workers; the 2 others finish the run") {
  constexpr int kSteps = 300;  // 7.5 epochs of 40 steps
  TempDir dir("elastic_gpt");
  writeFile(dir / "text.txt", corpus());
  const std::string mirrored = "[strategy]\ntype = \"mirrored\"\nworkers = 3\n";
  writeFile(dir / "job.toml",
            gptJob(dir / "run", dir / "text.txt", 1, mirrored + "[cluster]\nelastic = true\n"));
  writeFile(dir / "reference.toml", gptJob(dir / "reference", dir / "text.txt", 1, mirrored));
  // The survivors' sums run over 2 ranks instead of 3: trainWithSgd.
  const KilledWorker killed = killWorkerAndFinish(dir, trainWithSgd(dir / "job.toml", kSteps), kSteps, 2);
  CHECK(killed.generation.find("\"world_size\":2") != std::string::npos);

  const RunResult whole = runDtrain(trainWithSgd(dir / "reference.toml", kSteps));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  checkSameFinalWeights(dir / "run", dir / "reference", kSteps);
}
