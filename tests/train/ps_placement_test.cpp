// Parameter-server placement: tensors bin-packed over shards by bytes, large
// ones split into chunks, every float placed once, and the shipped models kept
// within 1.3x of the mean shard.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "models/model_builder.h"
#include "strategies/parameter_server/placement.h"

using namespace dtrain;

namespace {

// A store of one-dimensional tensors "t<i>.weight" of the given float counts.
ParamStore storeOf(const std::vector<int64_t>& sizes) {
  ParamStore store;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamSpec spec;
    spec.name = "weight";
    spec.shape = Shape{sizes[i]};
    store.add("t" + std::to_string(i), spec);
  }
  return store;
}

// Every float of [0, size) in exactly one range, ranges sorted and non-empty,
// and the per-shard totals are the sums of the shards' ranges.
void checkCoverage(const ShardPlacement& p, int64_t size) {
  int64_t at = 0;
  std::vector<int64_t> sums(p.shards, 0);
  for (const auto& r : p.ranges) {
    CHECK(r.begin == at);
    CHECK(r.end > r.begin);
    REQUIRE(r.shard >= 0);
    REQUIRE(r.shard < p.shards);
    sums[r.shard] += r.end - r.begin;
    at = r.end;
  }
  CHECK(at == size);
  CHECK(sums == p.shard_floats);
}

// Which shard holds the piece of `variable` that starts at `begin`.
int shardAt(const ShardPlacement& p, int64_t begin) {
  for (const auto& r : p.ranges)
    if (r.begin == begin) return r.shard;
  return -1;
}

ParamStore presetStore(const ModelSection& m, const Shape& input, int64_t classes) {
  auto model = buildModel(m, input, classes, builtinLayers());
  ParamStore store;
  model->registerParams(store);
  return store;
}

ModelSection preset(const std::string& name) {
  ModelSection m;
  m.preset = name;
  m.depth = 20;   // resnet (configs/fashion_resnet20.toml)
  m.width = 1.0;  // mobilenet_v2 (configs/cats_vs_dogs_mobilenet_v2.toml)
  return m;
}

}  // namespace

TEST_CASE("placement: largest first onto the least loaded shard") {
  // 160, 112, 80, 48 floats (multiples of 16, so no padding) over 2 shards:
  // t0 -> 0; t1 -> 1; t2 -> 1 (112 < 160); t3 -> 0 (160 < 192).
  ParamStore store = storeOf({160, 112, 80, 48});
  ShardPlacement p = placeVariables(store, 2, kMaxChunkFloats);
  checkCoverage(p, store.size());
  REQUIRE(p.ranges.size() == 4);
  CHECK(p.ranges[0].variable == "t0.weight");
  CHECK(p.ranges[0].shard == 0);
  CHECK(p.ranges[1].shard == 1);
  CHECK(p.ranges[2].shard == 1);
  CHECK(p.ranges[3].shard == 0);
  CHECK(p.shard_floats == std::vector<int64_t>{208, 192});
  // A shard's buffer: its ranges in flat order.
  auto own = p.rangesOf(0);
  REQUIRE(own.size() == 2);
  CHECK(own[0].variable == "t0.weight");
  CHECK(own[1].variable == "t3.weight");
}

TEST_CASE("placement: ties go to the lower shard, equal sizes in flat order") {
  ParamStore store = storeOf({32, 32, 32});
  ShardPlacement p = placeVariables(store, 2, kMaxChunkFloats);
  CHECK(shardAt(p, 0) == 0);
  CHECK(shardAt(p, 32) == 1);
  CHECK(shardAt(p, 64) == 0);
}

TEST_CASE("placement: an entry's padding travels with it") {
  // 10 floats occupy 16 in the flat buffer; 3 occupy the last 16.
  ParamStore store = storeOf({10, 3});
  ShardPlacement p = placeVariables(store, 2, kMaxChunkFloats);
  checkCoverage(p, store.size());
  CHECK(p.ranges[0].end == 16);
  CHECK(p.ranges[1].end == 32);
  CHECK(p.shard_floats == std::vector<int64_t>{16, 16});
}

TEST_CASE("placement: a tensor larger than the chunk is split into ceil(n / chunk) pieces over the shards") {
  // 4 MiB chunk, 3 Mi + 5 floats (3,145,744 with padding): 4 nearly equal
  // pieces on 16-float boundaries, one per shard.
  const int64_t n = 3 * kMaxChunkFloats + 5;
  ParamStore big = storeOf({n});
  ShardPlacement p = placeVariables(big, 4, kMaxChunkFloats);
  checkCoverage(p, big.size());
  REQUIRE(p.ranges.size() == 4);
  for (int s = 0; s < 4; ++s) {
    CHECK(p.ranges[s].variable == "t0.weight");
    CHECK(p.ranges[s].begin % 16 == 0);
    CHECK(p.ranges[s].end - p.ranges[s].begin <= kMaxChunkFloats);
    CHECK(p.ranges[s].shard == s);
  }
  CHECK(p.ranges[0].end == 786448);

  // 128 floats, chunk 32, 2 shards: pieces alternate.
  ParamStore small = storeOf({128});
  ShardPlacement q = placeVariables(small, 2, 32);
  checkCoverage(q, small.size());
  REQUIRE(q.ranges.size() == 4);
  CHECK(q.ranges[0].shard == 0);
  CHECK(q.ranges[1].shard == 1);
  CHECK(q.ranges[2].shard == 0);
  CHECK(q.ranges[3].shard == 1);
  CHECK(q.shard_floats == std::vector<int64_t>{64, 64});

  // 128 floats, chunk 48: 3 pieces, 48 + 48 + 32 (equal pieces, rounded up to 16).
  ShardPlacement r = placeVariables(small, 3, 48);
  REQUIRE(r.ranges.size() == 3);
  CHECK(r.shard_floats == std::vector<int64_t>{48, 48, 32});
}

TEST_CASE("placement: pieces of one tensor that land together are one range; different tensors never merge") {
  ParamStore store = storeOf({128, 16, 16});
  ShardPlacement p = placeVariables(store, 1, 32);
  checkCoverage(p, store.size());
  REQUIRE(p.ranges.size() == 3);  // t0's 4 pieces merged; t1 and t2 adjacent but distinct
  CHECK(p.ranges[0].variable == "t0.weight");
  CHECK(p.ranges[0].end == 128);
  CHECK(p.ranges[1].variable == "t1.weight");
  CHECK(p.ranges[2].variable == "t2.weight");
  CHECK(p.shard_floats == std::vector<int64_t>{160});
  CHECK(largestShareOverMean(p) == doctest::Approx(1.0));
}

TEST_CASE("placement: more shards than pieces leaves shards empty, and the table says so") {
  ParamStore store = storeOf({64, 32});
  ShardPlacement p = placeVariables(store, 4, kMaxChunkFloats);
  checkCoverage(p, store.size());
  CHECK(p.shard_floats == std::vector<int64_t>{64, 32, 0, 0});
  CHECK(p.rangesOf(3).empty());
  auto lines = describePlacement(p, true);
  REQUIRE(lines.size() == 1 + 4 + 2);
  CHECK(lines[0] == "placement: 4 shards, 384 B, largest shard 2.67x the mean");
  CHECK(lines[1] == "  shard 0: 256 B (66.7%), 1 variable (1 piece)");
  CHECK(lines[2] == "  shard 1: 128 B (33.3%), 1 variable (1 piece)");
  CHECK(lines[3] == "  shard 2: empty");
  CHECK(lines[4] == "  shard 3: empty");
  CHECK(lines[5] == "    shard 0  [0, 64)  256 B  t0.weight");
  CHECK(lines[6] == "    shard 1  [64, 96)  128 B  t1.weight");
  CHECK(describePlacement(p, false).size() == 5);
}

TEST_CASE("placement: the table counts variables and pieces, with human-readable sizes") {
  // 2 Mi floats (8 MiB) split into 2 pieces, plus a small tensor, on 1 shard.
  ParamStore store = storeOf({2 * kMaxChunkFloats, 256});
  ShardPlacement p = placeVariables(store, 1, kMaxChunkFloats);
  auto lines = describePlacement(p, false);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "placement: 1 shard, 8.0 MiB, largest shard 1.00x the mean");
  CHECK(lines[1] == "  shard 0: 8.0 MiB (100.0%), 2 variables (2 pieces)");  // t0's pieces merged
  ShardPlacement two = placeVariables(store, 2, kMaxChunkFloats);
  auto two_lines = describePlacement(two, true);
  CHECK(two_lines[1] == "  shard 0: 4.0 MiB (50.0%), 2 variables (2 pieces)");
  CHECK(two_lines[2] == "  shard 1: 4.0 MiB (50.0%), 1 variable (1 piece)");
  CHECK(two_lines[5] == "    shard 0  [2097152, 2097408)  1.0 KiB  t1.weight");
}

TEST_CASE("placement: one shard holds everything") {
  ParamStore store = presetStore(preset("cnn"), Shape{1, 28, 28}, 10);
  ShardPlacement p = placeVariables(store, 1);
  checkCoverage(p, store.size());
  CHECK(p.shard_floats == std::vector<int64_t>{store.size()});
  CHECK(p.ranges.size() == store.entries().size());  // all pieces of a tensor merge back
}

TEST_CASE("placement: deterministic for the same store") {
  auto a = presetStore(preset("resnet"), Shape{1, 28, 28}, 10);
  auto b = presetStore(preset("resnet"), Shape{1, 28, 28}, 10);
  for (int shards : {2, 3, 4}) {
    ShardPlacement pa = placeVariables(a, shards), pb = placeVariables(b, shards);
    REQUIRE(pa.ranges.size() == pb.ranges.size());
    for (size_t i = 0; i < pa.ranges.size(); ++i) {
      CHECK(pa.ranges[i].shard == pb.ranges[i].shard);
      CHECK(pa.ranges[i].begin == pb.ranges[i].begin);
      CHECK(pa.ranges[i].end == pb.ranges[i].end);
      CHECK(pa.ranges[i].variable == pb.ranges[i].variable);
    }
    CHECK(pa.shard_floats == pb.shard_floats);
  }
}

TEST_CASE("placement: fewer than one shard is a config error") {
  ParamStore store = storeOf({16});
  CHECK_THROWS_AS(placeVariables(store, 0), ConfigError);
  CHECK_THROWS_AS(placeVariables(store, -1, 64), ConfigError);
  CHECK_THROWS_AS(placeVariables(store, 2, 0), ConfigError);
}

TEST_CASE("placement: the chunk rule is at most 4 MiB and at most a quarter of a shard's mean") {
  CHECK(chunkFloatsFor(535824, 2) == 66992);  // mlp: ceil(535824 / 8) = 66978 -> 16-float multiple
  CHECK(chunkFloatsFor(int64_t(100) << 20, 4) == kMaxChunkFloats);
  CHECK(chunkFloatsFor(10, 4) == 16);
  CHECK(chunkFloatsFor(0, 1) == 16);
}

TEST_CASE("placement: a fixed 4 MiB chunk is not enough for the mlp preset") {
  // fc1.weight is 401,408 of the mlp's 535,824 floats; unsplit, it alone is
  // 1.5x the mean of 2 shards. This is why the default chunk follows the mean.
  ParamStore mlp = presetStore(preset("mlp"), Shape{1, 28, 28}, 10);
  CHECK(largestShareOverMean(placeVariables(mlp, 2, kMaxChunkFloats)) ==
        doctest::Approx(1.4983).epsilon(1e-3));
}

// Worst largest/mean over 2, 3 and 4 shards with the default chunk rule (and,
// for comparison, with a fixed 4 MiB chunk):
//   mlp           1.0125 at 4 shards  (fixed 4 MiB: 3.00, fc1.weight unsplit)
//   cnn           1.1269 at 4 shards  (fixed 4 MiB: 3.81, fc1.weight unsplit)
//   resnet20      1.0001 at 3 shards  (fixed 4 MiB: 1.08)
//   mobilenet_v2  1.0000 at 1000 and at 2 classes (fixed 4 MiB: 1.00)
// The guarantee is 1.25x plus rounding (placement.h); cnn comes nearest
// because after fc1.weight's 16 even pieces the next tensor (18,432
// floats) lands on a full shard.
TEST_CASE("placement: the shipped models stay within 1.3x of the mean shard") {
  struct Case {
    std::string name;
    ModelSection model;
    Shape input;
    int64_t classes;
  };
  const std::vector<Case> cases = {
      {"mlp", preset("mlp"), Shape{1, 28, 28}, 10},
      {"cnn", preset("cnn"), Shape{1, 28, 28}, 10},
      {"resnet20", preset("resnet"), Shape{1, 28, 28}, 10},
      {"mobilenet_v2", preset("mobilenet_v2"), Shape{3, 96, 96}, 1000},
      {"mobilenet_v2 (cats vs dogs)", preset("mobilenet_v2"), Shape{3, 96, 96}, 2},
  };
  for (const auto& c : cases) {
    ParamStore store = presetStore(c.model, c.input, c.classes);
    double worst = 0.0;
    for (int shards : {2, 3, 4}) {
      ShardPlacement p = placeVariables(store, shards);
      checkCoverage(p, store.size());
      worst = std::max(worst, largestShareOverMean(p));
    }
    MESSAGE(c.name << ": worst largest/mean over 2, 3, 4 shards = " << worst);
    CHECK(worst <= 1.3);
  }
}
