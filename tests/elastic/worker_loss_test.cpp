// In-job recovery of an elastic run on 2 hosts x 2 workers (network
// namespaces): a worker killed, frozen, or a whole host killed or cut off.
// Each time the run finishes by itself on the survivors, every step is
// logged once, the log names the lost rank and host and the new generation,
// and the final weights equal an uninterrupted run's within float tolerance.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>

#include "tests/elastic/elastic_run.h"

using namespace dtrain::testing;

namespace {

constexpr double kRunSeconds = 120;

// The run ended on host A with every step done and logged once, and one
// generation line: `world` workers, naming `lost` (a rank and its host).
void checkRecovered(const TempDir& dir, int code_a, int world, const std::vector<std::string>& lost) {
  const std::string log_a = readFile(dir / "a.log");
  INFO("host A: " << log_a);
  INFO("host B: " << readFile(dir / "b.log"));
  CHECK(code_a == 0);
  CHECK(log_a.find("done: step " + std::to_string(kElasticSteps) + ",") != std::string::npos);
  const ElasticLog log = readElasticLog(dir / "run");
  checkEveryStepOnce(log, kElasticSteps);
  REQUIRE(log.generations.size() == 1);
  const std::string& line = log.generations.front();
  CAPTURE(line);
  CHECK(line.find("\"generation\":2") != std::string::npos);
  CHECK(line.find("\"world_size\":" + std::to_string(world)) != std::string::npos);
  for (const std::string& text : lost) CHECK(line.find(text) != std::string::npos);
}

// Runs the elastic job on both hosts, does `fail` to it once it has
// checkpointed, and checks that host A finished it as checkRecovered says.
// Host B's exit code, or nullopt when skipped.
// `also` checks more of the finished run.
std::optional<int> recoverFrom(const std::string& tag,
                               const std::function<void(ElasticCluster&, const Started&)>& fail, int world,
                               const std::vector<std::string>& lost,
                               const std::function<void(const ElasticCluster&)>& also = {}) {
  ElasticCluster e(tag);
  if (!e.ready()) return std::nullopt;
  Started s = startBoth(e.cluster, e.dir);
  fail(e, s);
  const int code_a = e.cluster.wait(s.a, kRunSeconds);
  const int code_b = e.cluster.wait(s.b, 15);
  std::vector<std::string> named;
  for (const std::string& text : lost) named.push_back(text + " " + e.hostB());
  checkRecovered(e.dir, code_a, world, named);
  checkSameFinalWeights(e.dir / "run", referenceRun(e.dir));
  if (also) also(e);
  return code_b;
}

}  // namespace

TEST_CASE("elastic: kill -9 of one worker; the 3 others finish the run") {
  const auto code_b = recoverFrom(
      "elastic_kill", [](ElasticCluster&, const Started& s) { ::kill(workerOf(s.b, 1), SIGKILL); }, 3,
      {"lost rank 3"});
  if (code_b) CHECK(*code_b == 0);  // its other worker finished the run
}

TEST_CASE("elastic: every process of host B killed; host A's 2 workers finish the run") {
  const auto code_b =
      recoverFrom("elastic_host", [](ElasticCluster& e, const Started&) { e.cluster.killHost(1); }, 2,
                  {"rank 2", "rank 3"});
  if (code_b) CHECK(*code_b == 128 + SIGKILL);
}

TEST_CASE("elastic: a frozen worker (SIGSTOP) is left behind; its host ends it when the run is over") {
  const auto code_b = recoverFrom(
      "elastic_stop", [](ElasticCluster&, const Started& s) { ::kill(workerOf(s.b, 0), SIGSTOP); }, 3,
      {"lost rank 2"});
  if (code_b) CHECK(*code_b == 0);  // it killed the frozen worker once its other one finished
}

TEST_CASE("elastic: host B cut off the network; host A finishes, host B's workers stop") {
  const auto code_b = recoverFrom(
      "elastic_cut", [](ElasticCluster& e, const Started&) { REQUIRE(e.cluster.cutOff(1)); }, 2,
      {"rank 2", "rank 3"},
      [](const ElasticCluster& e) {
        CHECK(readFile(e.dir / "b.log").find("lost the coordinator") != std::string::npos);
      });
  if (!code_b) return;
  CHECK(*code_b != 0);
  CHECK(*code_b != -1);
}

TEST_CASE(
    "elastic: losing node 0 (the coordinator's host) stops host B within the heartbeat timeout, naming it") {
  ElasticCluster e("elastic_node0");
  if (!e.ready()) return;
  Started s = startBoth(e.cluster, e.dir);
  const auto t0 = std::chrono::steady_clock::now();
  e.cluster.killHost(0);
  const int code_b = e.cluster.wait(s.b, 3.0 + 6);  // twoHostJob's heartbeat_timeout_s, and margin
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log_b = readFile(e.dir / "b.log");
  INFO("host B: " << log_b);
  REQUIRE(code_b != -1);
  CHECK(code_b != 0);
  CHECK(took < 3.0 + 6);
  CHECK(log_b.find("lost the coordinator at tcp://" + NetnsCluster::address(0)) != std::string::npos);
  CHECK(e.cluster.wait(s.a, 5) == 128 + SIGKILL);
  CHECK(runDtrain({"eval", e.dir / "run/checkpoints/latest", "--json"}).exit_code == 0);
}
