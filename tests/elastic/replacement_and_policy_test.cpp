// An elastic run on 2 hosts x 2 workers grows back when a replacement host
// joins, stops with a checkpoint at its policy limits (max_restarts,
// min_workers), and loses no checkpoint when its chief is killed while it
// writes them or a second worker is lost while the group re-forms.
#include <doctest/doctest.h>

#include <csignal>
#include <thread>

#include "tests/elastic/elastic_run.h"

using namespace dtrain::testing;

namespace {

constexpr double kRunSeconds = 120;

// Every complete checkpoint of the run reads back (dtrain eval verifies its manifest).
void checkEveryCheckpointReads(const std::string& run_dir) {
  int bad = 0;
  for (const std::string& step : stepDirs(run_dir)) {
    RunResult r = runDtrain({"eval", run_dir + "/checkpoints/" + step, "--json"});
    if (r.exit_code != 0) {
      MESSAGE(step << ": " << r.output);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

// Host A's dtrain failed saying `why`, after the chief wrote the checkpoint of
// the step the group re-formed at; every checkpoint reads back.
void checkStoppedWithCheckpoint(const ElasticCluster& e, int code_a, const std::string& why) {
  const std::string log_a = readFile(e.dir / "a.log");
  INFO("host A: " << log_a);
  CHECK(code_a != 0);
  CHECK(code_a != -1);
  CHECK(log_a.find(why) != std::string::npos);
  const ElasticLog log = readElasticLog(e.dir / "run");
  REQUIRE(log.generations.size() == 1);
  const int64_t at = std::atoll(log.generations[0].c_str() + log.generations[0].find(':') + 1);
  CAPTURE(at);
  REQUIRE(!stepDirs(e.dir / "run").empty());
  CHECK(stepDirs(e.dir / "run").back() == stepDirName(static_cast<int>(at)));
  checkEveryCheckpointReads(e.dir / "run");
}

}  // namespace

TEST_CASE("elastic: a replacement host started with the same command joins, and the run grows back to 4") {
  ElasticCluster e("elastic_grow");
  if (!e.ready()) return;
  NetnsCluster& cluster = e.cluster;
  const TempDir& dir = e.dir;
  constexpr int kSteps = 1680;  // room for host B to come back
  Started s = startBoth(cluster, dir, kSteps);
  cluster.killHost(1);
  CHECK(cluster.wait(s.b, 10) == 128 + SIGKILL);
  REQUIRE(waitFor([&] { return readElasticLog(dir / "run").generations.size() == 1; }, 30));
  const pid_t b = cluster.start(1, elasticTrain(dir, 1, kSteps), dir / "b2.log");
  const int code_a = cluster.wait(s.a, kRunSeconds);
  const int code_b = cluster.wait(b, 15);
  INFO("host A: " << readFile(dir / "a.log"));
  INFO("host B again: " << readFile(dir / "b2.log"));
  CHECK(code_a == 0);
  CHECK(code_b == 0);
  const ElasticLog log = readElasticLog(dir / "run");
  checkEveryStepOnce(log, kSteps);
  REQUIRE(log.generations.size() == 2);
  CAPTURE(log.generations[1]);
  CHECK(log.generations[0].find("\"world_size\":2") != std::string::npos);
  CHECK(log.generations[1].find("\"world_size\":4") != std::string::npos);
  CHECK(log.generations[1].find("joined node 1 slot 0 (host " + cluster.prefix() + "-h1") !=
        std::string::npos);
  checkSameFinalWeights(dir / "run", referenceRun(dir, kSteps), kSteps);
}

TEST_CASE("elastic: more losses than max_restarts stop the run with a checkpoint") {
  ElasticCluster e("elastic_restarts", [](std::string& job) { job += "max_restarts = 0\n"; });
  if (!e.ready()) return;
  Started s = startBoth(e.cluster, e.dir);
  ::kill(workerOf(s.b, 1), SIGKILL);
  checkStoppedWithCheckpoint(e, e.cluster.wait(s.a, kRunSeconds), "more than [cluster] max_restarts = 0");
  CHECK(e.cluster.wait(s.b, 15) != -1);
}

TEST_CASE("elastic: fewer workers than min_workers stop the run with a checkpoint") {
  ElasticCluster e("elastic_min", [](std::string& job) {
    job.replace(job.find("[strategy]\n"), 11, "[strategy]\nmin_workers = 3\n");
  });
  if (!e.ready()) return;
  Started s = startBoth(e.cluster, e.dir);
  e.cluster.killHost(1);
  checkStoppedWithCheckpoint(e, e.cluster.wait(s.a, kRunSeconds),
                             "only 2 worker(s) remain, fewer than [strategy] min_workers = 3");
}

TEST_CASE("elastic: the chief killed while it writes checkpoints every step; the next rank takes over") {
  ElasticCluster e("elastic_chief", [](std::string& job) {
    job.replace(job.find("checkpoint_every_steps = 7"), 26, "checkpoint_every_steps = 1");
  });
  if (!e.ready()) return;
  NetnsCluster& cluster = e.cluster;
  const TempDir& dir = e.dir;
  Started s = startBoth(cluster, dir);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(workerOf(s.a, 0), SIGKILL);  // rank 0, most likely inside a checkpoint
  const int code_a = cluster.wait(s.a, kRunSeconds);
  CHECK(cluster.wait(s.b, 15) == 0);
  INFO("host A: " << readFile(dir / "a.log"));
  CHECK(code_a == 0);
  const ElasticLog log = readElasticLog(dir / "run");
  checkEveryStepOnce(log, kElasticSteps);
  REQUIRE(log.generations.size() == 1);
  CHECK(log.generations[0].find("lost rank 0 (host " + cluster.prefix() + "-h0") != std::string::npos);
  checkEveryCheckpointReads(dir / "run");
  checkSameFinalWeights(dir / "run", referenceRun(dir));
}

TEST_CASE("elastic: a second worker lost while the group re-forms; the last 2 finish the run") {
  ElasticCluster e("elastic_twice");
  if (!e.ready()) return;
  NetnsCluster& cluster = e.cluster;
  const TempDir& dir = e.dir;
  Started s = startBoth(cluster, dir);
  const pid_t rank2 = workerOf(s.b, 0), rank3 = workerOf(s.b, 1);
  ::kill(rank3, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(rank2, SIGKILL);
  const int code_a = cluster.wait(s.a, kRunSeconds);
  INFO("host A: " << readFile(dir / "a.log"));
  INFO("host B: " << readFile(dir / "b.log"));
  CHECK(code_a == 0);
  CHECK(cluster.wait(s.b, 15) != 0);  // none of its workers finished
  const ElasticLog log = readElasticLog(dir / "run");
  checkEveryStepOnce(log, kElasticSteps);
  REQUIRE(!log.generations.empty());
  CHECK(log.generations.back().find("\"world_size\":2") != std::string::npos);
  checkEveryCheckpointReads(dir / "run");
  checkSameFinalWeights(dir / "run", referenceRun(dir));
}
