// The pipeline strategy through the binary, with one process per stage:
// gpipe and 1f1b over 2 to 4 stages, micro-batches 1, N - 1 (gpipe), N, 2N
// and uneven ones, 1 and 2 replicas, on the mlp with dropout, the cnn and a
// residual DAG whose skip connections cross the cuts. Each run's final
// weights and optimizer state equal one process's with the same global batch
// within 1e-5 (with momentum SGD: Adam's division by the gradients' running
// size turns float-order differences in gradients near zero into whole
// steps, so it would measure Adam, not the pipeline); stages named by layer
// work as the automatic split does; the final evaluation, run through the
// stages, scores what `dtrain eval` of the checkpoint does; the job's
// configuration errors are one line naming the key or the layer, before any
// process starts.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/train/pipeline_jobs.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

struct Shape {
  std::string schedule;
  int stages, micro_batches, replicas;
};

}  // namespace

TEST_CASE(
    "pipeline: every schedule, stage count, micro-batch count and replica count ends as one process does") {
  TempDir dir("pipe_equal");
  const std::vector<Shape> shapes = {{"gpipe", 2, 1, 1}, {"gpipe", 3, 2, 1}, {"1f1b", 2, 2, 1},
                                     {"1f1b", 3, 6, 1},  {"gpipe", 4, 3, 1}, {"1f1b", 2, 3, 2},
                                     {"gpipe", 3, 4, 2}};
  for (const ModelCase& m : models()) {
    CAPTURE(m.name);
    const std::string one = dir / (m.name + "_one");
    train(job(one, m, ""), one + ".toml");
    for (const Shape& s : shapes) {
      CAPTURE(s.schedule);
      CAPTURE(s.stages);
      CAPTURE(s.micro_batches);
      CAPTURE(s.replicas);
      const std::string run = dir / (m.name + "_" + s.schedule + "_" + std::to_string(s.stages) + "_" +
                                     std::to_string(s.micro_batches) + "_" + std::to_string(s.replicas));
      train(job(run, m,
                "[strategy]\ntype = \"pipeline\"\nstages = " + std::to_string(s.stages) +
                    "\nmicro_batches = " + std::to_string(s.micro_batches) + "\nschedule = \"" + s.schedule +
                    "\"\nreplicas = " + std::to_string(s.replicas) + "\n"),
            run + ".toml");
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(checkpointDifference(run + "/checkpoints/latest", one + "/checkpoints/latest", file) <= 1e-5);
      }
      // The final evaluation, run through the stages, scores what the whole
      // model does on the checkpoint the run wrote (`dtrain eval`).
      const LoggedEval piped = lastLoggedEval(run);
      const EvalFigures whole = evalFigures(run);
      CHECK(piped.samples == 40);
      CHECK(piped.accuracy == whole.accuracy);
      CHECK(piped.loss == doctest::Approx(whole.loss).epsilon(1e-5));
    }
  }
}

TEST_CASE(
    "pipeline: stages named by layer train as the automatic split does, and the start-up line shows them") {
  TempDir dir("pipe_named");
  const ModelCase m = models()[2];
  const std::string one = dir / "one";
  train(job(one, m, ""), one + ".toml");
  const std::string named = dir / "named";
  writeFile(
      named + ".toml",
      job(named, m,
          "[strategy]\ntype = \"pipeline\"\nmicro_batches = 2\n"
          "[[strategy.stages]]\nlayers = [\"stem\", \"c1\", \"r1\", \"c2\", \"sum1\", \"act1\", \"c3\"]\n"
          "[[strategy.stages]]\nlayers = [\"sum2\", \"c4\", \"p\", \"sum3\", \"flat\", \"fc\"]\n"));
  const RunResult r = runDtrain({"train", named + ".toml"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find(
            "2 stages x 1 replica, 1f1b over 2 micro-batches (stage 0: stem..c3; stage 1: sum2..fc)") !=
        std::string::npos);
  CHECK(checkpointDifference(named + "/checkpoints/latest", one + "/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}

TEST_CASE("pipeline: configuration errors are one line naming the key or the layer") {
  TempDir dir("pipe_errors");
  const ModelCase m = models()[2];
  struct Case {
    std::string strategy, says;
  };
  const std::vector<Case> cases = {
      {"type = \"pipeline\"\nstages = 3\nmicro_batches = 2\n",
       "\"1f1b\" needs micro_batches >= stages (got 2 over 3 stages)"},
      {"type = \"pipeline\"\nstages = 0\n", "[strategy] stages must be in [1, 64] (got 0)"},
      {"type = \"pipeline\"\nschedule = \"zigzag\"\n", "[strategy] schedule must be one of"},
      {"type = \"pipeline\"\n[[strategy.stages]]\nlayers = [\"stem\", \"c1\"]\n"
       "[[strategy.stages]]\nlayers = [\"r1\", \"c2\", \"sum1\", \"act1\", \"c3\", \"sum2\", \"c4\", \"p\", "
       "\"sum3\", \"flat\"]\n",
       "'fc'"},
      {"type = \"pipeline\"\n[[strategy.stages]]\nlayers = [\"stem\", \"c1\", \"r1\", \"c2\", \"sum1\", "
       "\"act1\", \"c3\", \"sum2\", \"c4\", \"p\", \"sum3\", \"flat\", \"fc\", \"nope\"]\n"
       "[[strategy.stages]]\nlayers = []\n",
       "'nope'"},
      {"type = \"pipeline\"\n[[strategy.stages]]\nlayer = [\"stem\"]\n", "unknown key 'layer'"},
      {"type = \"mirrored\"\n[[strategy.stages]]\nlayers = [\"stem\"]\n", "use type = \"pipeline\""},
      {"type = \"pipeline\"\nstage_memory_mb = -1\n", "[strategy] stage_memory_mb must be >= 0"},
      {"type = \"pipeline\"\nstage_memory_mb = 0.001\n",
       "strategy.stage_memory_mb = 0.001: no split into 2 stages fits; the least any needs is"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.strategy);
    writeFile(dir / "job.toml", job(dir / "run", m, "[strategy]\n" + c.strategy));
    const RunResult r = runDtrain({"train", dir / "job.toml", "--set", "train.steps=1"});
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(lineCount(r.output) == 1);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
}

TEST_CASE("pipeline: cuts moved after the stages measured themselves train on as one process does") {
  // Split by FLOPs, a convolution outweighs sixteen dropouts (which count
  // one per element) and the cut falls next to it; timed on 32x32 planes, the
  // dropouts' masks cost several times the convolution. Sixteen, because the
  // split also charges stage 0 the copies across its cut (about five masks'
  // worth), and on some machines six dropouts did not outweigh both. After step 2 the split is planned again
  // from what the stages measured, the cuts move, every stage's values go through the whole copies into the
  // new stages, and training goes on: 8 steps end where one process does, with either schedule and with
  // replicas.
  TempDir dir("pipe_rebalance");
  std::string layers =
      "[model]\n[[model.layers]]\nname = \"conv\"\ntype = \"conv2d\"\ninputs = [\"input\"]\n"
      "filters = 16\nkernel = 3\npadding = 1\n";
  std::string last = "conv";
  for (int d = 1; d <= 16; ++d) {
    const std::string name = "drop" + std::to_string(d);
    layers += "[[model.layers]]\nname = \"" + name + "\"\ntype = \"dropout\"\ninputs = [\"" + last +
              "\"]\nrate = 0.1\n";
    last = name;
  }
  layers += "[[model.layers]]\nname = \"flat\"\ntype = \"flatten\"\ninputs = [\"" + last +
            "\"]\n[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\ninputs = [\"flat\"]\nunits = 4\n";
  const ModelCase m{"dropouts", layers};
  auto longer = [](std::string toml) {
    toml.replace(toml.find("steps = 3\n"), 10, "steps = 8\n");
    toml.replace(toml.find("shape = [1, 8, 8]"), 17, "shape = [1, 32, 32]");
    // Micro-batches of 7 to 20 samples: the masks' cost per sample, not each
    // layer's fixed cost, sets the stages' times.
    toml.replace(toml.find("batch_size = 10\n"), 16, "batch_size = 40\n");
    return toml;
  };
  const std::string one = dir / "one";
  train(longer(job(one, m, "")), one + ".toml");
  for (const char* shape : {"schedule = \"1f1b\"\nmicro_batches = 2\n",
                            "schedule = \"gpipe\"\nmicro_batches = 3\nreplicas = 2\n"}) {
    CAPTURE(shape);
    const std::string run = dir / (std::string("run_") + (shape[12] == '1' ? "1f1b" : "gpipe"));
    writeFile(run + ".toml", longer(job(run, m,
                                        std::string("[strategy]\ntype = \"pipeline\"\nstages = 2\n") + shape +
                                            "split_by = \"flops\"\nrebalance_after_steps = 2\n")));
    const RunResult r = runDtrain({"train", run + ".toml"});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("pipeline: after step 2 the stages computed ") != std::string::npos);
    CHECK(r.output.find("; moved the cuts (stage 0: conv..drop") != std::string::npos);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(checkpointDifference(run + "/checkpoints/latest", one + "/checkpoints/latest", file) <= 1e-5);
    }
  }
}

TEST_CASE(
    "pipeline: a run resumed with 2 stages, then as one process, then mirrored, ends where 4 stages straight "
    "through do") {
  TempDir dir("pipe_resume");
  const ModelCase m = models()[1];  // the cnn
  const std::string four = "[strategy]\ntype = \"pipeline\"\nstages = 4\nmicro_batches = 4\n";
  auto longer = [](std::string toml) {
    toml.replace(toml.find("steps = 3\n"), 10, "steps = 28\n");
    toml.replace(toml.find("checkpoint_every_steps = 0"), 26, "checkpoint_every_steps = 7");
    return toml;
  };
  const std::string straight = dir / "straight";
  train(longer(job(straight, m, four)), straight + ".toml");
  // Killed after step 9 (its last checkpoint step 7's), resumed with 2
  // stages and killed after step 16 (step 14's), resumed as one process and
  // killed after step 23 (step 21's), then resumed by 2 mirrored workers.
  const std::string run = dir / "changing";
  writeFile(run + ".toml", longer(job(run, m, four)));
  const RunResult first = runDtrain({"train", run + ".toml", "-q", "--fault-kill-at-step", "9"});
  CHECK(first.exit_code != 0);
  const RunResult second =
      runDtrain({"resume", run, "-q", "--set", "strategy.stages=2", "--fault-kill-at-step", "16"});
  INFO(second.output);
  CHECK(second.exit_code != 0);
  const RunResult third =
      runDtrain({"resume", run, "-q", "--set", "strategy.type=one_device", "--fault-kill-at-step", "23"});
  INFO(third.output);
  CHECK(third.exit_code != 0);
  CHECK(stepDirs(run).back().find("step-00000021") != std::string::npos);
  const RunResult fourth =
      runDtrain({"resume", run, "-q", "--set", "strategy.type=mirrored", "--set", "strategy.workers=2"});
  INFO(fourth.output);
  REQUIRE(fourth.exit_code == 0);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(checkpointDifference(run + "/checkpoints/latest", straight + "/checkpoints/latest", file) <= 1e-5);
  }
  CHECK(stepDirs(run).back().find("step-00000028") != std::string::npos);
}

namespace {

// Starts a 3-stage run, sends stage 1's process `signal` once two checkpoints
// are written, and returns the host's exit code, the seconds it took to end
// and its output.
struct Stopped {
  int code = -1;
  double seconds = 0;
  std::string log;
};

Stopped signalStage(const TempDir& dir, int signal) {
  std::string toml =
      job(dir / "run", models()[1], "[strategy]\ntype = \"pipeline\"\nstages = 3\nmicro_batches = 3\n");
  toml.replace(toml.find("steps = 3\n"), 10, "steps = 100000\n");
  toml.replace(toml.find("checkpoint_every_steps = 0"), 26, "checkpoint_every_steps = 5");
  writeFile(dir / "job.toml", toml);
  const pid_t host = startDtrain({"train", dir / "job.toml"}, dir / "log");
  REQUIRE(waitFor([&] { return stepDirs(dir / "run").size() >= 2; }, 60));
  // The host's workers, in the order it started them: rank 0, 1, 2.
  std::vector<pid_t> workers;
  std::istringstream in(
      readFile("/proc/" + std::to_string(host) + "/task/" + std::to_string(host) + "/children"));
  for (pid_t p; in >> p;) workers.push_back(p);
  REQUIRE(workers.size() == 3);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(workers[1], signal);
  Stopped out;
  out.code = waitExit(host);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.log = readFile(dir / "log");
  if (signal == SIGSTOP) ::kill(workers[1], SIGKILL);
  return out;
}

}  // namespace

TEST_CASE(
    "pipeline: a stage killed stops every process at once, naming it, and the checkpoint before stays") {
  TempDir dir("pipe_kill");
  const Stopped s = signalStage(dir, SIGKILL);
  INFO(s.log);
  CHECK(s.code != 0);
  CHECK(s.seconds < 10);  // a closed connection or exited process is seen at once, not after the heartbeat
  CHECK(s.log.find("rank 1 (node 0, slot 1)") != std::string::npos);
  CHECK(s.log.find("SIGKILL") != std::string::npos);
  // The latest checkpoint is whole: it evaluates.
  CHECK(evalFigures(dir / "run").accuracy >= 0);
}

TEST_CASE("pipeline: a stage frozen stops every process within the heartbeat timeout, naming it") {
  TempDir dir("pipe_frozen");
  const Stopped s = signalStage(dir, SIGSTOP);
  INFO(s.log);
  CHECK(s.code != 0);
  CHECK(s.seconds < 20);  // [cluster] heartbeat_timeout_s, 10 s
  CHECK(s.log.find("lost rank 1 (host") != std::string::npos);
  CHECK(s.log.find("no heartbeat for") != std::string::npos);
  CHECK(evalFigures(dir / "run").accuracy >= 0);
}

TEST_CASE("pipeline: the stages' messages over Gloo (a Gloo collective) train as over shared memory") {
  TempDir dir("pipe_gloo");
  const ModelCase m = models()[2];
  const std::string one = dir / "one";
  train(job(one, m, ""), one + ".toml");
  const std::string gloo = dir / "gloo";
  writeFile(gloo + ".toml",
            job(gloo, m,
                "[strategy]\ntype = \"pipeline\"\nstages = 3\nmicro_batches = 3\ncollective = \"ring\"\n"));
  const RunResult r = runDtrain({"train", gloo + ".toml"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("messages over gloo (ring)") != std::string::npos);
  CHECK(checkpointDifference(gloo + "/checkpoints/latest", one + "/checkpoints/latest",
                             "model.safetensors") <= 1e-5);
}
