// The elastic runs of these tests: the multihost tests' 2 hosts x 2 workers
// job with [cluster] elastic, long enough to lose a worker mid-run, and what
// a finished run must show: every step logged once, the generation changes,
// and final weights equal to an uninterrupted run's within float tolerance.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/multihost/netns_cluster.h"
#include "tests/multihost/two_host_job.h"
#include "tests/train/run_helpers.h"

namespace dtrain::testing {

// 40 epochs of 21 steps: long enough to lose a worker after the first checkpoint.
inline constexpr int kElasticSteps = 840;

inline std::string elasticJob(const std::string& run_dir, const std::string& token_file,
                              const std::string& cluster_extra = "") {
  return twoHostJob(run_dir, token_file) + "elastic = true\n" + cluster_extra;
}

inline std::vector<std::string> elasticTrain(const TempDir& dir, int node, int steps = kElasticSteps) {
  return {"train",  dir / "job.toml",    "-q", "--set", "train.steps=" + std::to_string(steps),
          "--node", std::to_string(node)};
}

// What metrics.jsonl says of a run.
struct ElasticLog {
  std::map<int64_t, int> train_steps;    // step -> lines
  std::vector<std::string> generations;  // the generation lines, in order
};

inline ElasticLog readElasticLog(const std::string& run_dir) {
  ElasticLog log;
  std::istringstream lines(readFile(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"event\":\"generation\"") != std::string::npos) log.generations.push_back(line);
    if (line.find("\"split\":\"train\"") == std::string::npos) continue;
    ++log.train_steps[std::atoll(line.c_str() + line.find(':') + 1)];
  }
  return log;
}

// Every step 1..steps logged exactly once.
inline void checkEveryStepOnce(const ElasticLog& log, int steps) {
  CHECK(static_cast<int>(log.train_steps.size()) == steps);
  int twice = 0;
  for (const auto& [step, lines] : log.train_steps) twice += lines != 1;
  CHECK(twice == 0);
  CHECK(log.train_steps.begin()->first == 1);
  CHECK(log.train_steps.rbegin()->first == steps);
}

// The uninterrupted reference: the same job, 4 workers on one host.
inline std::string referenceRun(const TempDir& dir, int steps = kElasticSteps) {
  writeFile(dir / "one_host.toml", oneHostJob(dir / "one_host"));
  RunResult whole =
      runDtrain({"train", dir / "one_host.toml", "-q", "--set", "train.steps=" + std::to_string(steps)});
  REQUIRE(whole.exit_code == 0);
  return dir / "one_host";
}

// The final weights of an elastic run against the reference's: the ranks'
// sums ran over another number of workers for part of the run, so equal
// within float tolerance, not bit for bit.
inline std::string stepDirName(int step) {
  const std::string n = std::to_string(step);
  return "step-" + std::string(8 - n.size(), '0') + n;
}

inline void checkSameFinalWeights(const std::string& run_dir, const std::string& reference,
                                  int steps = kElasticSteps) {
  const std::string last = "/checkpoints/" + stepDirName(steps);
  const double diff = checkpointDifference(run_dir + last, reference + last, "model.safetensors");
  CAPTURE(diff);
  CHECK(diff < 1e-4);
}

struct Started {
  pid_t a = -1, b = -1;
};

// Both hosts' dtrain, B first; returns once the run has written a checkpoint.
inline Started startBoth(NetnsCluster& cluster, const TempDir& dir, int steps = kElasticSteps) {
  Started s;
  s.b = cluster.start(1, elasticTrain(dir, 1, steps), dir / "b.log");
  s.a = cluster.start(0, elasticTrain(dir, 0, steps), dir / "a.log");
  const bool checkpointed = waitFor([&] { return !stepDirs(dir / "run").empty(); }, 30);
  INFO("host A: " << readFile(dir / "a.log"));
  INFO("host B: " << readFile(dir / "b.log"));
  REQUIRE(checkpointed);
  return s;
}

// A 2-host cluster with the elastic job written to its run's directory
// (`job` may edit it); ready() is false (and says why) without namespaces.
struct ElasticCluster {
  explicit ElasticCluster(const std::string& tag, const std::function<void(std::string&)>& edit = {})
      : cluster(2), dir(tag) {
    writeFile(dir / "cluster.token", "token-of-this-test\n");
    std::string job = elasticJob(dir / "run", dir / "cluster.token");
    if (edit) edit(job);
    writeFile(dir / "job.toml", job);
  }
  bool ready() const {
    if (!cluster.available()) MESSAGE("skipped, no network namespaces here: " << cluster.whyUnavailable());
    return cluster.available();
  }
  std::string hostB() const { return "(host " + cluster.prefix() + "-h1"; }

  NetnsCluster cluster;
  TempDir dir;
};

// A host's dtrain's worker of `slot` (its workers in start order).
inline pid_t workerOf(pid_t host, int slot) {
  std::vector<pid_t> workers;
  waitFor([&] { return static_cast<int>((workers = workersOf(host)).size()) > slot; }, 10);
  REQUIRE(static_cast<int>(workers.size()) > slot);
  return workers[static_cast<size_t>(slot)];
}

// A one-host elastic run of `train` (a `dtrain train` command line whose run
// directory is dir/run), its output in dir/run.log, whose worker `slot` is
// killed with SIGKILL once the run has written a checkpoint: the survivors
// end the run by themselves at step `steps`, every step logged once, after
// exactly one change of their group. Returns the killed worker's pid and the
// metrics line of that change.
struct KilledWorker {
  pid_t pid = -1;
  std::string generation;
};

inline KilledWorker killWorkerAndFinish(const TempDir& dir, const std::vector<std::string>& train, int steps,
                                        int slot) {
  const pid_t host = startDtrain(train, dir / "run.log");
  const bool checkpointed = waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60);
  INFO("run: " << readFile(dir / "run.log"));
  REQUIRE(checkpointed);
  KilledWorker killed;
  killed.pid = workerOf(host, slot);
  REQUIRE(::kill(killed.pid, SIGKILL) == 0);
  const int code = waitExit(host);
  const std::string log = readFile(dir / "run.log");
  CAPTURE(log);
  CHECK(code == 0);
  CHECK(log.find("done: step " + std::to_string(steps) + ",") != std::string::npos);
  const ElasticLog metrics = readElasticLog(dir / "run");
  checkEveryStepOnce(metrics, steps);
  REQUIRE(metrics.generations.size() == 1);
  killed.generation = metrics.generations.front();
  return killed;
}

}  // namespace dtrain::testing
