// Elastic recovery of a language model: a tiny GPT trained by 3 mirrored
// workers on one host loses one to kill -9; the 2 others finish the run, every
// step logged once, at the weights of an uninterrupted run of 3.
#include <doctest/doctest.h>

#include <csignal>

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
  // SGD: the survivors' sums run over 2 ranks instead of 3, a reordering of
  // the float sums that SGD carries unamplified (as the thread-split tests).
  auto train = [&](const std::string& job) {
    return std::vector<std::string>{"train",
                                    job,
                                    "-q",
                                    "--set",
                                    "train.steps=" + std::to_string(kSteps),
                                    "--set",
                                    "optimizer.type=sgd",
                                    "--set",
                                    "optimizer.lr=0.1",
                                    "--set",
                                    "optimizer.weight_decay=0"};
  };
  const pid_t host = startDtrain(train(dir / "job.toml"), dir / "run.log");
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
  CHECK(metrics.generations.front().find("\"world_size\":2") != std::string::npos);

  const RunResult whole = runDtrain(train(dir / "reference.toml"));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  checkSameFinalWeights(dir / "run", dir / "reference", kSteps);
}
