// Training end to end through the binary: accuracy on real data, what a run
// writes, and that splitting a batch across compute threads computes what one
// thread computes.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/io/json.h"
#include "core/train/checkpoint.h"
#include "tests/train/run_helpers.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::vector<JsonValue> metricsLines(const std::string& run_dir) {
  std::vector<JsonValue> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(parseJson(line));
  return out;
}

}  // namespace

TEST_CASE("one epoch of the shipped mlp on Fashion-MNIST passes 0.83 test accuracy") {
  TempDir tmp("e2e");
  std::string run = tmp / "run";
  RunResult r = runDtrain({"train", std::string(DTRAIN_SOURCE_DIR) + "/configs/fashion_mlp.toml", "--set",
                           "train.epochs=1", "--set", "job.run_dir=" + run});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  RunResult e = runDtrain({"eval", run + "/checkpoints/latest", "--json"});
  REQUIRE_MESSAGE(e.exit_code == 0, e.output);
  JsonValue v = parseJson(e.output);
  CHECK(v.find("samples")->asInt64() == 10000);
  CHECK(v.find("accuracy")->asDouble() > 0.83);
  CHECK(v.find("loss")->asDouble() < 0.5);
  // The evaluation the run printed agrees with `dtrain eval` of its checkpoint.
  auto lines = metricsLines(run);
  const JsonValue& last = lines.back();
  CHECK(last.find("split")->asString() == "test");
  CHECK(last.find("accuracy")->asDouble() == doctest::Approx(v.find("accuracy")->asDouble()).epsilon(1e-9));
}

TEST_CASE("metrics.jsonl has one line per step and per evaluation with the documented fields") {
  TempDir tmp("metrics");
  std::string run = tmp / "run";
  writeFile(tmp / "job.toml", smallJob(run, "[train]\nepochs = 2\nbatch_size = 100\neval_every_steps = 4\n"));
  // smallJob already has a [train] table; replace it rather than repeat it.
  std::string job = smallJob(run);
  job.replace(job.find("[train]"), job.find("[optimizer]") - job.find("[train]"),
              "[train]\nepochs = 2\nbatch_size = 100\neval_every_steps = 4\n");
  writeFile(tmp / "job.toml", job);
  RunResult r = runDtrain({"train", tmp / "job.toml", "--quiet"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  auto lines = metricsLines(run);
  int train = 0, test = 0;
  for (const JsonValue& l : lines) {
    for (const char* key : {"step", "epoch", "split", "loss", "accuracy", "images_per_s", "time"})
      CHECK_MESSAGE(l.find(key) != nullptr, key);
    if (l.find("split")->asString() == "train") {
      ++train;
      CHECK(l.find("step")->asInt64() == train);
      CHECK(l.find("epoch")->asInt64() == (train - 1) / 10);
      CHECK(l.find("samples")->asInt64() == 100);
    } else {
      ++test;
      CHECK(l.find("samples")->asInt64() == 200);
      // Each step's figures are logged a step late (the GPU pipeline's order),
      // but an evaluation still follows the line of the step it evaluates.
      CHECK(l.find("step")->asInt64() == train);
      // An evaluation belongs to the epoch of the step it follows.
      CHECK(l.find("epoch")->asInt64() == (l.find("step")->asInt64() - 1) / 10);
    }
  }
  CHECK(train == 20);
  // Every 4 steps (4,8,12,16,20) and each epoch end (10; 20 again is not repeated).
  CHECK(test == 6);
  // TensorBoard gets the same events: one file, the version record, then one
  // record per step and per evaluation (tests/checkpoint/tensorboard_test.cpp
  // checks the records' checksums and fields).
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(run + "/tensorboard"))
    files.push_back(e.path().string());
  REQUIRE(files.size() == 1);
  CHECK(files[0].find("events.out.tfevents.") != std::string::npos);
  std::ifstream events(files[0], std::ios::binary);
  int records = 0;
  uint64_t length = 0;
  while (events.read(reinterpret_cast<char*>(&length), sizeof length)) {
    events.seekg(static_cast<std::streamoff>(4 + length + 4), std::ios::cur);
    if (events) ++records;
  }
  CHECK(records == 1 + 20 + 6);
}

TEST_CASE("each step's line holds that step's own figures, though they are settled a step late") {
  // A run of k steps logs its step k last, at its end; the longer run logs
  // step k while step k+1 is queued. With a constant learning rate both have
  // computed the same k steps, so the lines must be identical but for the time.
  TempDir tmp("settle");
  auto trainLines = [&](int steps) {
    const std::string run = tmp / ("s" + std::to_string(steps));
    std::string job = smallJob(run);
    job.replace(job.find("[schedule]"), std::string::npos, "[schedule]\ntype = \"constant\"\n");
    writeFile(tmp / "job.toml", job);
    RunResult r =
        runDtrain({"train", tmp / "job.toml", "--quiet", "--set", "train.steps=" + std::to_string(steps),
                   "--set", "train.checkpoint_every_steps=0"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    std::vector<JsonValue> out;
    for (const JsonValue& l : metricsLines(run))
      if (l.find("split")->asString() == "train") out.push_back(l);
    return out;
  };
  const std::vector<JsonValue> longer = trainLines(6);
  REQUIRE(longer.size() == 6);
  for (int k : {1, 3}) {
    const std::vector<JsonValue> shorter = trainLines(k);
    REQUIRE(shorter.size() == static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) {
      CAPTURE(k);
      CAPTURE(i);
      CHECK(shorter[i].find("step")->asInt64() == i + 1);
      CHECK(shorter[i].find("loss")->asDouble() == longer[i].find("loss")->asDouble());
      CHECK(shorter[i].find("accuracy")->asDouble() == longer[i].find("accuracy")->asDouble());
    }
  }
  // Consecutive steps differ (training moves), so a line shifted by one would fail above.
  CHECK(longer[1].find("loss")->asDouble() != longer[2].find("loss")->asDouble());
}

TEST_CASE("two compute threads compute what one thread computes") {
  TempDir tmp("threads");
  auto weightsAfter = [&](int threads) {
    std::string run = tmp / ("t" + std::to_string(threads));
    std::string job = smallJob(run);
    job.replace(job.find("threads = 2"), 11, "threads = " + std::to_string(threads));
    writeFile(tmp / "job.toml", job);
    RunResult r = runDtrain({"train", tmp / "job.toml", "--quiet", "--set", "train.epochs=2"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return readCheckpoint(run + "/checkpoints/latest").weights;
  };
  SafetensorsFile one = weightsAfter(1), two = weightsAfter(2), three = weightsAfter(3);
  REQUIRE(one.tensors.size() == two.tensors.size());
  double max_diff = 0, max_abs = 0;
  for (size_t t = 0; t < one.tensors.size(); ++t) {
    const auto& a = one.tensors[t].data;
    for (const SafetensorsFile* other : {&two, &three}) {
      const auto& b = other->tensors[t].data;
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
        max_abs = std::max(max_abs, std::fabs(double(a[i])));
      }
    }
  }
  // Only the order of float sums differs; after 42 AdamW steps that stays tiny.
  MESSAGE("max |w1 - wN| = " << max_diff << " (max |w| = " << max_abs << ")");
  CHECK(max_diff < 1e-4 * max_abs);
  CHECK(max_diff > 0.0);  // different sum orders are expected; equal bits would mean one path ran
}
