// bf16 and fp16 runs through the binary: fp16's loss scale skips an
// overflowing step and survives a resume; a run changes precision across
// resumes and its checkpoints stay fp32; every strategy in bf16 computes
// what one process computes in bf16; and bad settings fail in one line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/ops.h"
#include "core/io/json.h"
#include "tests/train/run_helpers.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// The train lines of a run's metrics.jsonl, by step.
std::map<int64_t, JsonValue> trainLines(const std::string& run_dir) {
  std::map<int64_t, JsonValue> lines;
  std::istringstream in(readFile(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    JsonValue v = parseJson(line);
    const JsonValue* split = v.find("split");
    if (split && split->isString() && split->asString() == "train") lines[v.find("step")->asInt64()] = v;
  }
  return lines;
}

double number(const JsonValue& line, const char* key) {
  const JsonValue* v = line.find(key);
  REQUIRE_MESSAGE(v, "no \"", key, "\" in a metrics line");
  return v->asDouble();
}

std::string checkpointOf(const std::string& run_dir, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", step);
  return run_dir + "/checkpoints/" + name;
}

std::string precisionJob(const std::string& run_dir, const std::string& precision, const std::string& extra = "") {
  std::string job = smallJob(run_dir, extra);
  job.replace(job.find("[job]\n"), 6, "[job]\nprecision = \"" + precision + "\"\n");
  return job;
}

}  // namespace

TEST_CASE("fp16: an overflow skips exactly that step and halves the scale; a resume keeps the scale") {
  TempDir dir("fp16_overflow");
  writeFile(dir / "job.toml", precisionJob(dir / "a", "fp16"));
  auto trainArgs = [&](const std::string& job, int steps) {
    return std::vector<std::string>{"train", job, "-q", "--fault-overflow-at-step", "5", "--set",
                                    "train.steps=" + std::to_string(steps), "--set",
                                    "train.checkpoint_every_steps=1", "--set",
                                    "train.loss_scale_growth_interval=3"};
  };
  RunResult a = runDtrain(trainArgs(dir / "job.toml", 10));
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  const auto lines = trainLines(dir / "a");
  REQUIRE(lines.size() == 10);
  // 65536 for steps 1-3, x2 after the third finite step, halved by step 5's overflow.
  CHECK(number(lines.at(3), "loss_scale") == 65536);
  CHECK(number(lines.at(4), "loss_scale") == 131072);
  CHECK(number(lines.at(5), "loss_scale") == 131072);
  CHECK(number(lines.at(5), "skipped_steps") == 1);
  CHECK(number(lines.at(4), "skipped_steps") == 0);
  CHECK(number(lines.at(6), "loss_scale") == 65536);
  CHECK(number(lines.at(10), "skipped_steps") == 1);
  // The skipped step changed nothing: weights and optimizer state as after step 4.
  CHECK(checkpointDifference(checkpointOf(dir / "a", 5), checkpointOf(dir / "a", 4), "model.safetensors") == 0);
  CHECK(checkpointDifference(checkpointOf(dir / "a", 5), checkpointOf(dir / "a", 4), "optimizer.safetensors") == 0);
  CHECK(checkpointDifference(checkpointOf(dir / "a", 6), checkpointOf(dir / "a", 5), "model.safetensors") > 0);
  CHECK(readFile(checkpointOf(dir / "a", 5) + "/state.toml").find("loss_scale = 65536") != std::string::npos);

  // The same run stopped after step 6 and resumed: the same scale, the same weights.
  writeFile(dir / "job_b.toml", precisionJob(dir / "b", "fp16"));
  RunResult b = runDtrain(trainArgs(dir / "job_b.toml", 6));
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  RunResult resumed = runDtrain({"resume", dir / "b", "-q", "--set", "train.steps=10"});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto b_lines = trainLines(dir / "b");
  for (int64_t step : {7, 8, 9, 10}) {
    CAPTURE(step);
    CHECK(number(b_lines.at(step), "loss_scale") == number(lines.at(step), "loss_scale"));
    CHECK(number(b_lines.at(step), "skipped_steps") == 1);
  }
  CHECK(readFile(dir / "b/checkpoints/latest/model.safetensors") ==
        readFile(dir / "a/checkpoints/latest/model.safetensors"));
}

TEST_CASE("fp16 on 2 workers (mirrored, central storage, a sync parameter server): the step skipped, one scale") {
  // The overflow is injected on every worker: each must skip that update
  // and keep the scale one process keeps, ending on its very weights.
  TempDir dir("fp16_workers");
  writeFile(dir / "one.toml", precisionJob(dir / "one", "fp16"));
  auto run = [&](const std::string& name) {
    RunResult r = runDtrain({"train", dir / (name + ".toml"), "-q", "--fault-overflow-at-step", "4", "--set",
                             "train.steps=12", "--set", "train.loss_scale_growth_interval=2"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  };
  run("one");
  const auto one = trainLines(dir / "one");
  CHECK(number(one.at(4), "skipped_steps") == 1);
  for (const std::string type : {"mirrored", "central_storage", "parameter_server"}) {
    CAPTURE(type);
    writeFile(dir / (type + ".toml"),
              oneThread(precisionJob(dir / type, "fp16", "[strategy]\ntype = \"" + type + "\"\nworkers = 2\n")));
    run(type);
    CHECK(readFile(dir / (type + "/checkpoints/latest/model.safetensors")) ==
          readFile(dir / "one/checkpoints/latest/model.safetensors"));
    const auto lines = trainLines(dir / type);
    for (int64_t step : {4, 5, 12}) {
      CAPTURE(step);
      CHECK(number(lines.at(step), "loss_scale") == number(one.at(step), "loss_scale"));
      CHECK(number(lines.at(step), "skipped_steps") == 1);
    }
  }
}

TEST_CASE("fp32 -> bf16 -> fp32 across resumes: the bf16 leg resumes exactly and its checkpoints stay fp32") {
  TempDir dir("precision_chain");
  // Two chains, the second with its bf16 leg itself stopped and resumed half way.
  for (const char* run : {"a", "b"}) {
    writeFile(dir / (std::string(run) + ".toml"), precisionJob(dir / run, "fp32"));
    RunResult r = runDtrain({"train", dir / (std::string(run) + ".toml"), "-q", "--set", "train.steps=6"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  auto resume = [&](const char* run, const char* precision, int steps) {
    RunResult r = runDtrain({"resume", dir / run, "-q", "--set", std::string("job.precision=") + precision, "--set",
                             "train.steps=" + std::to_string(steps)});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  };
  resume("a", "bf16", 14);
  resume("b", "bf16", 10);
  resume("b", "bf16", 14);
  CHECK(readFile(dir / "a/checkpoints/latest/model.safetensors") ==
        readFile(dir / "b/checkpoints/latest/model.safetensors"));
  CHECK(readFile(dir / "a/checkpoints/latest/state.toml").find("precision = \"bf16\"") != std::string::npos);
  // The bf16 leg's weights are fp32 masters: most are no bf16 value.
  const SafetensorsFile saved = readSafetensors(dir / "a/checkpoints/latest/model.safetensors");
  int64_t values = 0, bf16_values = 0;
  for (const auto& t : saved.tensors)
    for (float v : t.data) {
      float r = v;
      ops::roundTo16Bits(ops::HalfFormat::Bf16, &r, &r, 1);
      ++values;
      bf16_values += r == v;
    }
  CHECK(bf16_values < values / 4);
  // `dtrain eval` reads the checkpoint in its own precision: the score the run logged.
  const LoggedEval logged = lastLoggedEval(dir / "a");
  const EvalFigures evaluated = evalFigures(dir / "a");
  CHECK(evaluated.accuracy == doctest::Approx(logged.accuracy).epsilon(1e-9));
  CHECK(evaluated.loss == doctest::Approx(logged.loss).epsilon(1e-6));
  // And back to fp32, on the same position.
  resume("a", "fp32", 20);
  resume("b", "fp32", 20);
  CHECK(readFile(dir / "a/checkpoints/latest/model.safetensors") ==
        readFile(dir / "b/checkpoints/latest/model.safetensors"));
  CHECK(trainLines(dir / "a").size() == 20);
}

TEST_CASE("bf16: mirrored and central storage workers compute what one process computes, bit for bit") {
  // Each worker computes its slice as a compute thread of one process would,
  // and rounding is per value: the same bits, as in fp32.
  TempDir dir("bf16_strategies");
  writeFile(dir / "one.toml", precisionJob(dir / "one", "bf16"));
  REQUIRE(runDtrain({"train", dir / "one.toml", "-q", "--set", "train.steps=12"}).exit_code == 0);
  for (const char* type : {"mirrored", "central_storage"}) {
    CAPTURE(type);
    const std::string run = type;
    writeFile(dir / (run + ".toml"),
              oneThread(precisionJob(dir / run, "bf16",
                                     "[strategy]\ntype = \"" + run + "\"\nworkers = 2\n")));
    RunResult r = runDtrain({"train", dir / (run + ".toml"), "-q", "--set", "train.steps=12"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(readFile(dir / (run + "/checkpoints/latest/model.safetensors")) ==
          readFile(dir / "one/checkpoints/latest/model.safetensors"));
  }
}

TEST_CASE("bf16: a parameter server and a pipeline compute what one process computes, within bf16's bound") {
  // These sum a step's gradients in another order (a shard sums the
  // workers' slices; a pipeline's micro-batches add up one after another),
  // so fp32 masters differ in their last bits, and a master near the middle
  // of two bf16 values may round to the other one: one bf16 unit, 2^-8 of
  // the weight. Such a weight changes its layer's gradients by at most u =
  // 2^-8 relative, and AdamW's update, lr x m / sqrt(v), by at most lr x 2u
  // per step: after k steps the weights differ by at most k lr 2u. With
  // k = 12, lr = 0.003 that is 1.9e-4, relative to the largest weight.
  TempDir dir("bf16_strategies_bound");
  writeFile(dir / "one.toml", precisionJob(dir / "one", "bf16"));
  REQUIRE(runDtrain({"train", dir / "one.toml", "-q", "--set", "train.steps=12"}).exit_code == 0);
  const SafetensorsFile one = readSafetensors(dir / "one/checkpoints/latest/model.safetensors");
  double largest = 0;
  for (const auto& t : one.tensors)
    for (float v : t.data) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  const double bound = 12 * 0.003 * 2 * std::ldexp(1.0, -8) / largest;
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"ps", "[strategy]\ntype = \"parameter_server\"\nworkers = 2\nps = 1\n"},
      {"pipeline", "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 3\nsplit_by = \"flops\"\n"}};
  for (const auto& [run, strategy] : runs) {
    CAPTURE(run);
    writeFile(dir / (run + ".toml"), oneThread(precisionJob(dir / run, "bf16", strategy)));
    RunResult r = runDtrain({"train", dir / (run + ".toml"), "-q", "--set", "train.steps=12"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const double diff = checkpointDifference(dir / (run + "/checkpoints/latest"), dir / "one/checkpoints/latest",
                                             "model.safetensors");
    CAPTURE(diff);
    CHECK(diff <= bound);
  }
}

TEST_CASE("fp16 on a pipeline: an overflow on any stage skips the step on every stage") {
  TempDir dir("fp16_pipeline");
  writeFile(dir / "job.toml",
            oneThread(precisionJob(dir / "p", "fp16",
                                   "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 2\n"
                                   "split_by = \"flops\"\n")));
  RunResult r = runDtrain({"train", dir / "job.toml", "-q", "--fault-overflow-at-step", "3", "--set",
                           "train.steps=5", "--set", "train.checkpoint_every_steps=1"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(number(trainLines(dir / "p").at(3), "skipped_steps") == 1);
  CHECK(number(trainLines(dir / "p").at(4), "loss_scale") == 32768);
  CHECK(checkpointDifference(checkpointOf(dir / "p", 3), checkpointOf(dir / "p", 2), "model.safetensors") == 0);
  CHECK(checkpointDifference(checkpointOf(dir / "p", 4), checkpointOf(dir / "p", 3), "model.safetensors") > 0);
}

TEST_CASE("precision settings that cannot run fail in one line naming the key") {
  TempDir dir("precision_errors");
  writeFile(dir / "job.toml", smallJob(dir / "r"));
  struct Bad {
    std::vector<std::string> sets;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {{"job.precision=fp8"}, "[job] precision must be one of 'fp32', 'tf32', 'bf16', 'fp16'"},
      {{"job.precision=fp16", "strategy.type=parameter_server", "strategy.consistency=async"},
       "\"fp16\" needs a parameter server with consistency = \"sync\""},
      {{"job.precision=fp16", "strategy.type=parameter_server", "strategy.gradient_push=during_backward"},
       "\"fp16\" pushes gradients after backward"},
      {{"train.loss_scale_backoff=1.5"}, "[train] loss_scale_backoff must be in (0, 1)"},
      {{"train.loss_scale_growth_interval=0"}, "[train] loss_scale_growth_interval must be > 0"},
      {{"train.loss_scale_initial=-1"}, "[train] loss_scale_initial must be > 0"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = {"train", dir / "job.toml", "-q"};
    for (const std::string& s : b.sets) args.insert(args.end(), {"--set", s});
    RunResult r = runDtrain(args);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(lineCount(r.output) == 1);
    CHECK(r.output.find(b.says) != std::string::npos);
  }
}

TEST_CASE("dtrain check prints the precision of each layer's passes") {
  TempDir dir("precision_check");
  writeFile(dir / "job.toml", smallJob(dir / "r"));
  RunResult r = runDtrain({"check", dir / "job.toml", "--set", "job.precision=bf16"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("# precision: bf16 (mixed") != std::string::npos);
  CHECK(r.output.find("bf16 x bf16, fp32 sums -> bf16") != std::string::npos);
  CHECK(r.output.find("bf16 grads, fp32 weight grads") != std::string::npos);
  CHECK(r.output.find("rounded to bf16") != std::string::npos);
  RunResult fp16 = runDtrain({"check", dir / "job.toml", "--set", "job.precision=fp16"});
  CHECK(fp16.output.find("loss scale from 65536, x2 after 2000 finite steps, x0.5 on an overflow") !=
        std::string::npos);
}
