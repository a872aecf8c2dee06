// The sharded strategy (ZeRO stages 1 and 2) through the binary: each worker
// keeps 1/N of the optimizer state (and, stage 2, of the summed gradients),
// updates its shard and all-gathers the parameters. Its gradient sums are
// mirrored's (the same buckets, the same collective: a reduce-scatter is the
// all-reduce of the bucket here) and AdamW is element by element, so without
// clipping it trains to mirrored's bits; with clipping the global norm sums
// the shards' squares in another order, which may move the factor by an ulp.
// Its checkpoints hold the whole state, so a resume may change the workers,
// the stage and the strategy.
#include <doctest/doctest.h>

#include <string>

#include "tests/train/gpt_jobs.h"
#include "tests/train/memory_cgroup.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

std::string strategy(const std::string& type, int workers, int stage = 0) {
  return "[strategy]\ntype = \"" + type + "\"\nworkers = " + std::to_string(workers) + "\n" +
         (stage ? "stage = " + std::to_string(stage) + "\n" : "");
}

double difference(const TempDir& dir, const std::string& a, const std::string& b, const char* file) {
  return checkpointDifference(latestOf(dir, a), latestOf(dir, b), file);
}

}  // namespace

TEST_CASE("sharded: stages 1, 2 and 3 with 2 and 4 workers train to mirrored's bits (AdamW, accumulation)") {
  TempDir dir("sharded_equal");
  for (int workers : {2, 4})
    for (const std::string accumulate : {"1", "2"}) {
      CAPTURE(workers);
      CAPTURE(accumulate);
      const std::vector<std::string> more = {"--set", "train.accumulate=" + accumulate};
      const std::string tag = std::to_string(workers) + "_" + accumulate;
      trainNamed(dir, "mirrored" + tag,
                 oneThread(smallJob(dir / ("mirrored" + tag), strategy("mirrored", workers))), 20, more);
      for (int stage : {1, 2, 3}) {
        CAPTURE(stage);
        const std::string name = "stage" + std::to_string(stage) + "_" + tag;
        trainNamed(dir, name, oneThread(smallJob(dir / name, strategy("sharded", workers, stage))), 20, more);
        for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
          CAPTURE(file);
          const std::string bits = readFile(latestOf(dir, name) + "/" + file);
          CHECK(bits.size() > 10000);  // AdamW's two moments of 11,492 parameters, or the weights
          CHECK(bits == readFile(latestOf(dir, "mirrored" + tag) + "/" + file));
        }
      }
    }
}

TEST_CASE(
    "sharded: the cnn, ResNet-20 (batch norm) and the GPT train to mirrored's bits in fp32 (stage 3), bf16 "
    "and "
    "fp16 (stage 2, a forced overflow skipped alike)") {
  TempDir dir("sharded_models");
  writeFile(dir / "text.txt", corpus());
  const std::string images =
      "[data]\ndataset = \"synthetic\"\ntrain_samples = 64\ntest_samples = 16\nshape = [3, 8, 8]\n"
      "classes = 4\n[train]\nbatch_size = 16\ncheckpoint_every_steps = 0\n"
      "[optimizer]\ntype = \"adamw\"\nlr = 0.003\nweight_decay = 0.01\n";
  auto imageJob = [&](const std::string& run, const std::string& model, const std::string& strategy) {
    return "[job]\nname = \"m\"\nrun_dir = \"" + run + "\"\nseed = 3\nthreads = 1\n" + model + images +
           strategy;
  };
  struct Case {
    std::string name, model;
  };
  for (const Case& m : {Case{"cnn", "[model]\npreset = \"cnn\"\n"},
                        Case{"resnet20", "[model]\npreset = \"resnet\"\ndepth = 20\n"}, Case{"gpt", ""}})
    for (const std::string precision : {"fp32", "bf16", "fp16"}) {
      CAPTURE(m.name);
      CAPTURE(precision);
      std::vector<std::string> more = {"--set", "job.precision=" + precision};
      if (precision == "fp16") more.insert(more.end(), {"--fault-overflow-at-step", "3"});
      std::string bits[2];
      for (int sharded = 0; sharded < 2; ++sharded) {
        const std::string name = m.name + precision + (sharded ? "_sharded" : "_mirrored");
        // Stage 3 is fp32 only (the GPT's tied output weight: a group gathered through the step).
        const int stage = precision == "fp32" ? 3 : 2;
        const std::string strat = sharded ? strategy("sharded", 2, stage) : strategy("mirrored", 2);
        const std::string job = m.name == "gpt" ? gptJob(dir / name, dir / "text.txt", 1, strat)
                                                : imageJob(dir / name, m.model, strat);
        trainNamed(dir, name, job, 6, more);
        bits[sharded] = readFile(latestOf(dir, name) + "/optimizer.safetensors") +
                        readFile(latestOf(dir, name) + "/model.safetensors");
      }
      CHECK(bits[0].size() > 10000);
      CHECK(bits[1] == bits[0]);
    }
}

TEST_CASE("sharded: SGD with and without momentum and Adam train to mirrored's bits too") {
  TempDir dir("sharded_optimizers");
  for (const std::string optimizer :
       {"optimizer.type=sgd", "optimizer.momentum=0.9", "optimizer.type=adam"}) {
    CAPTURE(optimizer);
    std::vector<std::string> more = {"--set", optimizer};
    if (optimizer == "optimizer.momentum=0.9") more = {"--set", "optimizer.type=sgd", "--set", optimizer};
    const std::string tag = std::to_string(more.size()) + optimizer.substr(optimizer.find('=') + 1);
    trainNamed(dir, "mirrored" + tag, oneThread(smallJob(dir / ("mirrored" + tag), strategy("mirrored", 2))),
               12, more);
    for (int stage : {2, 3}) {
      const std::string name = "stage" + std::to_string(stage) + tag;
      trainNamed(dir, name, oneThread(smallJob(dir / name, strategy("sharded", 2, stage))), 12, more);
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(readFile(latestOf(dir, name) + "/" + file) ==
              readFile(latestOf(dir, "mirrored" + tag) + "/" + file));
      }
    }
  }
}

TEST_CASE("sharded: stage 2 with two compute threads per worker trains to mirrored's bits") {
  // Each worker's replicas sum into the first before the reduce-scatter;
  // the others' buffers go back to the system, and must read as zeros again.
  TempDir dir("sharded_threads");
  trainNamed(dir, "mirrored", smallJob(dir / "mirrored", strategy("mirrored", 2)), 20);
  trainNamed(dir, "sharded", smallJob(dir / "sharded", strategy("sharded", 2, 2)), 20);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(readFile(latestOf(dir, "sharded") + "/" + file) ==
          readFile(latestOf(dir, "mirrored") + "/" + file));
  }
}

TEST_CASE("sharded: clipping by the global norm over the shards equals mirrored's clipping") {
  TempDir dir("sharded_clip");
  const std::vector<std::string> clip = {"--set", "train.grad_clip_norm=0.05"};
  trainNamed(dir, "mirrored", oneThread(smallJob(dir / "mirrored", strategy("mirrored", 2))), 20, clip);
  trainNamed(dir, "sharded", oneThread(smallJob(dir / "sharded", strategy("sharded", 2, 2))), 20, clip);
  trainNamed(dir, "unclipped", oneThread(smallJob(dir / "unclipped", strategy("sharded", 2, 2))), 20);
  // The clip factor is a float from a double sum taken in another order: at
  // most an ulp (6e-8) apart per step, 20 steps.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(difference(dir, "sharded", "mirrored", file) <= 1e-6);
  }
  // 0.05 is below the gradients' norm early on: clipping made a difference.
  CHECK(difference(dir, "sharded", "unclipped", "model.safetensors") > 1e-4);
}

TEST_CASE("sharded: the start-up line says what each worker holds") {
  TempDir dir("sharded_line");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", strategy("sharded", 2, 2))));
  const RunResult r = runDtrain({"train", dir / "job.toml", "--set", "train.steps=2"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("2 workers, stage 2: optimizer state and gradients sharded") != std::string::npos);
}

TEST_CASE(
    "sharded: 4 workers stage 3 -> 2 workers stage 1 -> one_device -> mirrored, resumed from kills, ends "
    "where a straight run does") {
  TempDir dir("sharded_resume");
  trainNamed(dir, "straight", oneThread(smallJob(dir / "straight", strategy("mirrored", 2))), 30);
  writeFile(dir / "chain.toml", oneThread(smallJob(dir / "chain", strategy("sharded", 4, 3))));
  // Killed after steps 9, 16 and 23; the checkpoints are every 7 steps.
  RunResult r =
      runDtrain({"train", dir / "chain.toml", "-q", "--set", "train.steps=30", "--fault-kill-at-step", "9"});
  CHECK(r.exit_code != 0);
  CHECK(stepDirs(dir / "chain").back() == "step-00000007");
  const std::vector<std::vector<std::string>> legs = {
      {"--set", "strategy.workers=2", "--set", "strategy.stage=1", "--fault-kill-at-step", "16"},
      {"--set", "strategy.type=one_device", "--fault-kill-at-step", "23"},
      {"--set", "strategy.type=mirrored", "--set", "strategy.workers=2"}};
  const std::vector<std::string> left = {"step-00000014", "step-00000021", "step-00000030"};
  for (size_t leg = 0; leg < legs.size(); ++leg) {
    CAPTURE(leg);
    std::vector<std::string> args = {"resume", dir / "chain", "-q"};
    args.insert(args.end(), legs[leg].begin(), legs[leg].end());
    r = runDtrain(args);
    INFO(r.output);
    if (leg + 1 < legs.size())
      CHECK(r.exit_code != 0);
    else
      REQUIRE(r.exit_code == 0);
    CHECK(stepDirs(dir / "chain").back() == left[leg]);
  }
  // The one-process leg sums each global batch's gradient in one slice, the
  // others over two or four: float rounding of the sums' order.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(difference(dir, "chain", "straight", file) <= 1e-5);
  }
}

TEST_CASE("sharded: a checkpoint holds the whole state, which dtrain eval reads as any other") {
  TempDir dir("sharded_eval");
  trainNamed(dir, "mirrored", oneThread(smallJob(dir / "mirrored", strategy("mirrored", 2))), 8);
  trainNamed(dir, "sharded", oneThread(smallJob(dir / "sharded", strategy("sharded", 2, 2))), 8);
  CHECK(readFile(latestOf(dir, "sharded") + "/optimizer.safetensors") ==
        readFile(latestOf(dir, "mirrored") + "/optimizer.safetensors"));
  const RunResult r = runDtrain({"eval", latestOf(dir, "sharded"), "--json"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("\"accuracy\"") != std::string::npos);
}

TEST_CASE("sharded: what is not built is refused in one line naming the keys") {
  TempDir dir("sharded_refused");
  struct Case {
    std::string set, says;
  };
  for (const Case& c : {Case{"strategy.stage=4", "[strategy] stage must be"},
                        Case{"job.threads=2", "[job] threads must be 1 with stage 3"},
                        Case{"job.precision=bf16", "[job] precision \"bf16\" is not built for stage 3 yet"},
                        Case{"job.device=cuda", "'sharded' runs on CPU workers in this build"}}) {
    CAPTURE(c.set);
    writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", strategy("sharded", 2, 3))));
    const RunResult r = runDtrain({"train", dir / "job.toml", "--set", c.set});
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(lineCount(r.output) == 1);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
}

namespace {

// An mlp of 16 layers of 512 (4.0M parameters, layer groups of one layer at
// bucket_mb = 1): AdamW's state whole is 64 MB a worker; the activations of
// 8 samples are small.
std::string memoryJob(const std::string& run_dir, const std::string& strategy_table,
                      const std::string& hidden =
                          "[512, 512, 512, 512, 512, 512, 512, 512, 512, 512, 512, 512, "
                          "512, 512, 512, 512]") {
  return "[job]\nname = \"mem\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 3\nthreads = 1\n"
         "[model]\npreset = \"mlp\"\nhidden = " +
         hidden +
         "\n"
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 64\ntest_samples = 16\nshape = [1, 16, 16]\n"
         "classes = 4\n[train]\nsteps = 3\nbatch_size = 8\ncheckpoint_every_steps = 0\n"
         "[optimizer]\ntype = \"adamw\"\nlr = 0.001\n" +
         strategy_table + "bucket_mb = 1\n";
}

}  // namespace

TEST_CASE(
    "sharded: dtrain check predicts each worker's memory, and a job over its limit is refused in one line") {
  TempDir dir("sharded_memory");
  writeFile(dir / "mirrored.toml", memoryJob(dir / "mirrored", strategy("mirrored", 2)));
  writeFile(dir / "stage3.toml", memoryJob(dir / "stage3", strategy("sharded", 2, 3)));
  // Predicted per worker, n = 4,073,476: mirrored 4n + 4n + 8n; stage 3
  // 4n/2 + 4n/2 + 8n/2, parameters and gradients with the two largest layer
  // groups in flight (the first two layers together, 394,240 floats, and one
  // of 262,656).
  RunResult r = runDtrain({"check", dir / "mirrored.toml"});
  INFO(r.output);
  CHECK(r.output.find("# memory per worker (2 workers x 1 thread): parameters 15.5 MB, gradients 15.5 MB, "
                      "optimizer state 31.1 MB") != std::string::npos);
  r = runDtrain({"check", dir / "stage3.toml"});
  CHECK(r.output.find("parameters 10.3 MB, gradients 10.3 MB, optimizer state 15.5 MB") != std::string::npos);
  // 50 MB a worker: mirrored's state alone is more; stage 3's fits.
  r = runDtrain({"train", dir / "mirrored.toml", "--set", "job.memory_limit_mb=50"});
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("more than its memory limit of 50.0 MB; [strategy] type = \"sharded\" with stage = ") !=
        std::string::npos);
  r = runDtrain({"train", dir / "stage3.toml", "-q", "--set", "job.memory_limit_mb=50"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("sharded: under a memory cgroup's limit mirrored cannot fit, stage 3 trains to the end") {
  // 16 layers of 1024 (16.0M parameters): mirrored's state is 245 MB a
  // worker, stage 3's 139 MB (dtrain check); a worker process measured 290 MB
  // at its peak as mirrored, 201 MB as stage 3 (its parameters whole at the
  // start and for the final evaluation). 470 MB for two workers and their host.
  MemoryCgroup cgroup(470ll << 20);
  if (!cgroup.made()) {
    MESSAGE("skipped: no memory cgroup could be made here (needs root and a memory controller)");
    return;
  }
  TempDir dir("sharded_cgroup");
  std::string hidden = "[1024";
  for (int i = 1; i < 16; ++i) hidden += ", 1024";
  hidden += "]";
  writeFile(dir / "mirrored.toml", memoryJob(dir / "mirrored", strategy("mirrored", 2), hidden));
  writeFile(dir / "stage3.toml", memoryJob(dir / "stage3", strategy("sharded", 2, 3), hidden));
  RunResult r = runDtrain({"train", dir / "mirrored.toml"}, cgroup.prefix());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("more than its memory limit of 235.0 MB") != std::string::npos);
  r = runDtrain({"train", dir / "stage3.toml", "-q"}, cgroup.prefix());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("done: step 3") != std::string::npos);
  // Told a limit far above the cgroup's, mirrored starts, and the kernel
  // kills a worker: the host names the out-of-memory killer and what to do.
  r = runDtrain({"train", dir / "mirrored.toml", "--set", "job.memory_limit_mb=100000"}, cgroup.prefix());
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("was killed by signal 9 (SIGKILL), by the kernel's out-of-memory killer") !=
        std::string::npos);
  CHECK(r.output.find("[strategy] type = \"sharded\" keeps 1/N of the training state") != std::string::npos);
}

TEST_CASE("sharded: a model of 16M parameters, its shards on 2 MiB pages, trains to mirrored's bits") {
  // Shards of at least 8 huge pages each start on a page boundary (the
  // other tests' models are smaller: their shards align to 16 floats).
  TempDir dir("sharded_pages");
  std::string hidden = "[1024";
  for (int i = 1; i < 16; ++i) hidden += ", 1024";
  hidden += "]";
  trainNamed(dir, "mirrored", memoryJob(dir / "mirrored", strategy("mirrored", 2), hidden), 2);
  for (int stage : {2, 3}) {
    const std::string name = "stage" + std::to_string(stage);
    trainNamed(dir, name, memoryJob(dir / name, strategy("sharded", 2, stage), hidden), 2);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(readFile(latestOf(dir, name) + "/" + file) == readFile(latestOf(dir, "mirrored") + "/" + file));
    }
  }
}

TEST_CASE("sharded: a stage-3 run killed mid-epoch resumes to the bits of an uninterrupted one") {
  // smallJob checkpoints every 7 steps: killed after step 16, it resumes from 14.
  TempDir dir("sharded_killed");
  trainNamed(dir, "ref", oneThread(smallJob(dir / "ref", strategy("sharded", 2, 3))), 20);
  writeFile(dir / "killed.toml", oneThread(smallJob(dir / "killed", strategy("sharded", 2, 3))));
  checkKilledRunResumesExactly({"train", dir / "killed.toml", "-q", "--set", "train.steps=20"}, 16,
                               dir / "killed", "step-00000014", dir / "ref");
}

TEST_CASE(
    "sharded: kill -9 of a stage-3 worker stops the run within seconds, naming it, no thread left waiting") {
  // The survivor's communication thread is in a gather or a reduction, its
  // compute thread waiting for a group: the lost peer fails the collective,
  // which wakes the waiting layer.
  TempDir dir("sharded_kill");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", strategy("sharded", 2, 3))));
  pid_t host = startDtrain({"train", dir / "job.toml", "-q", "--set", "train.epochs=200"}, dir / "log");
  REQUIRE(waitFor([&] { return !stepDirs(dir / "run").empty(); }, 60));
  const std::vector<pid_t> workers = workersOf(host);
  REQUIRE(workers.size() == 2);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(workers[1], SIGKILL);
  const int code = waitExit(host);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = readFile(dir / "log");
  INFO(log);
  CHECK(code == 137);
  CHECK(took < 12.0);
  CHECK(log.find("(pid " + std::to_string(workers[1]) + ") was killed by signal 9") != std::string::npos);
  CHECK(::kill(workers[0], 0) == -1);  // the survivor is gone too
  // Every checkpoint left behind is complete: the run resumes from the latest.
  const RunResult resumed = runDtrain({"resume", dir / "run", "-q", "--set", "train.epochs=1"});
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
}
