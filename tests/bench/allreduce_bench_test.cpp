// `dtrain bench allreduce` and the timing loop under it: the loop reports one
// time per timed call and refuses a collective whose sums are wrong; the
// subcommand starts real worker processes and prints verified figures.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/bench/allreduce_timing.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"
#include "core/io/json.h"
#include "tests/collectives/collectives_test_util.h"
#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

// Rank 0 of a pretend 2-rank group whose peer contributes what rank 1 would:
// in every round rank 1's value is rank 0's plus 1024. `wrong_at` >= 0
// corrupts that element of the result, as a misplaced chunk would.
class PretendPairGroup : public ProcessGroup {
 public:
  explicit PretendPairGroup(int64_t wrong_at = -1) : wrong_at_(wrong_at) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "pretend pair"; }
  void allReduceSum(float* data, int64_t n) override {
    ++calls;
    for (int64_t i = 0; i < n; ++i) data[i] = data[i] + (data[i] + 1024.0f);
    if (wrong_at_ >= 0 && wrong_at_ < n) data[wrong_at_] += 1.0f;
  }
  void allReduceSum(double*, int64_t) override {}
  void broadcast(float*, int64_t, int) override {}
  void broadcastBytes(uint8_t*, int64_t, int) override {}
  void allGather(const float*, int64_t, float*) override {}
  void reduceScatterSum(float*, const std::vector<int64_t>&) override {}
  void barrier() override { ++barriers; }
  int calls = 0, barriers = 0;

 private:
  int64_t wrong_at_;
};

TEST_CASE("the timing loop times each call after the warm-up and checks every sum") {
  PretendPairGroup group;
  AllReduceTimingOptions o;
  o.elements = 5000;
  o.warmup = 2;
  o.iters = 5;
  AllReduceTiming t = timeAllReduce(group, o);
  CHECK(t.seconds.size() == 5);
  CHECK(group.calls == 7);
  CHECK(group.barriers == 7);  // every call starts from a barrier
  CHECK(t.min() <= t.median());
  CHECK(t.median() <= t.max());
}

TEST_CASE("a wrong sum is refused, naming the rank, round and element") {
  PretendPairGroup group(4321);
  AllReduceTimingOptions o;
  o.elements = 5000;
  o.warmup = 0;
  o.iters = 3;
  try {
    timeAllReduce(group, o);
    FAIL("a wrong sum was accepted");
  } catch (const CommError& e) {
    std::string m = e.what();
    CHECK(m.find("rank 0 in round 0") != std::string::npos);
    CHECK(m.find("element 4321") != std::string::npos);
    CHECK(m.find("pretend pair") != std::string::npos);
  }
  CHECK(group.calls == 1);
}

TEST_CASE("the contributions differ per rank, element and round, and their sums are exact") {
  CHECK(allReduceTimingValue(0, 5, 0) != allReduceTimingValue(1, 5, 0));
  CHECK(allReduceTimingValue(0, 5, 0) != allReduceTimingValue(0, 6, 0));
  CHECK(allReduceTimingValue(0, 5, 0) != allReduceTimingValue(0, 5, 1));
  // The largest sum the limits allow is still an exact float32 integer.
  const int ranks = kAllReduceTimingMaxRanks, round = kAllReduceTimingMaxRounds - 1;
  double exact = 0;
  for (int r = 0; r < ranks; ++r) exact += 1020.0 + 1024.0 * r + 37.0 * round;
  CHECK(exact < 16777216.0);
  CHECK(static_cast<double>(allReduceTimingSum(ranks, 1020, round)) == exact);
}

TEST_CASE("median, min and max of the timed calls") {
  AllReduceTiming t;
  t.seconds = {0.3, 0.1, 0.4, 0.2};
  CHECK(t.median() == doctest::Approx(0.25));
  CHECK(t.min() == 0.1);
  CHECK(t.max() == 0.4);
  t.seconds = {0.3, 0.1, 0.2};
  CHECK(t.median() == 0.2);
}

TEST_CASE("options out of range are refused before any collective") {
  PretendPairGroup group;
  AllReduceTimingOptions o;
  o.elements = 0;
  CHECK_THROWS_AS(timeAllReduce(group, o), ConfigError);
  o.elements = 10;
  o.iters = 0;
  CHECK_THROWS_AS(timeAllReduce(group, o), ConfigError);
  CHECK(group.calls == 0);
}

TEST_CASE("real Gloo ranks pass the check for every algorithm, with an odd element count") {
  for (const char* algorithm : {"ring", "ring_chunked", "halving_doubling", "bcube"}) {
    CAPTURE(algorithm);
    InMemoryStore store;
    std::vector<AllReduceTiming> timings(2);
    auto errors = testing::runRanks(2, [&](int rank) {
      GlooProcessGroup group(store, rank, 2, testing::testOptions(algorithm));
      AllReduceTimingOptions o;
      o.elements = 100003;
      o.warmup = 1;
      o.iters = 2;
      timings[static_cast<size_t>(rank)] = timeAllReduce(group, o);
    });
    CHECK(errors[0] == "");
    CHECK(errors[1] == "");
    CHECK(timings[0].seconds.size() == 2);
    CHECK(timings[0].min() > 0);
  }
}

// Runs `dtrain bench allreduce` with `extra` arguments; returns its JSON line.
JsonValue benchJson(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"bench",   "allreduce", "--ranks",  "2", "--mb",  "0.5",
                                   "--iters", "3",         "--warmup", "1", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = testing::runDtrain(args);
  CAPTURE(r.output);
  REQUIRE(r.exit_code == 0);
  // Coordinator lines go to stderr; the figures are the one JSON line.
  std::istringstream lines(r.output);
  std::string line, json;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') json = line;
  REQUIRE(!json.empty());
  return parseJson(json);
}

TEST_CASE("dtrain bench allreduce starts the ranks as processes and prints verified figures") {
  JsonValue v = benchJson({});
  CHECK(v.find("ranks")->asInt64() == 2);
  CHECK(v.find("elements")->asInt64() == 125000);
  CHECK(v.find("bytes")->asInt64() == 500000);
  CHECK(v.find("algorithm")->asString() == "shared_memory");  // auto, with both ranks on this host
  CHECK(v.find("times_ms")->asArray().size() == 3);
  CHECK(v.find("median_ms")->asDouble() > 0);
  CHECK(v.find("verified")->asBool());
}

TEST_CASE("dtrain bench allreduce over Gloo when a Gloo algorithm is named") {
  JsonValue v = benchJson({"--collective", "halving_doubling"});
  CHECK(v.find("algorithm")->asString() == "halving_doubling");
  CHECK(v.find("collective")->asString() == "halving_doubling");
  CHECK(v.find("verified")->asBool());
}

TEST_CASE("dtrain bench allreduce refuses a size below one float, in one line") {
  auto r = testing::runDtrain({"bench", "allreduce", "--mb", "0.000001"});
  CHECK(r.exit_code == 2);
  CHECK(r.output == "dtrain: error: --mb 1e-06 is less than one float32 (4 bytes); use a larger --mb\n");
}

}  // namespace
}  // namespace dtrain
