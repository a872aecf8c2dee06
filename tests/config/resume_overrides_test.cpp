// What `dtrain resume` may change in a checkpoint's job (--set and --job FILE),
// and the inline-token case that needs the secret again.
#include "core/config/resume_overrides.h"

#include <doctest/doctest.h>

#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::applyResumeOverrides;
using dtrain::changeableOnResume;
using dtrain::JobConfig;
using dtrain::needsTokenAgain;
using dtrain::parseJobString;
using dtrain::withChangesFrom;
using dtrain::test::configErrorOf;
using dtrain::test::TempDir;

namespace {

const std::string kBody =
    "[job]\nname = \"small\"\nrun_dir = \"runs/small\"\nthreads = 1\n"
    "[model]\npreset = \"mlp\"\nhidden = [64, 32]\n"
    "[data]\ndataset = \"synthetic\"\n"
    "[train]\nepochs = 2\nbatch_size = 48\n"
    "[optimizer]\ntype = \"adamw\"\nlr = 0.003\n";

const std::string kTwoHosts =
    "[strategy]\ntype = \"multi_worker_mirrored\"\n"
    "[cluster]\ncoordinator = \"10.0.0.1:29500\"\ntoken = \"<hidden>\"\n"
    "hosts = [{ address = \"10.0.0.1\", slots = 2 }, { address = \"10.0.0.2\", slots = 2 }]\n";

// A job as `resume` reads it back from a checkpoint's state.toml.
JobConfig saved(const std::string& extra = "[strategy]\ntype = \"mirrored\"\nworkers = 2\n") {
  return parseJobString(kBody + extra, "state.toml");
}

}  // namespace

TEST_CASE("resume may change where and how long a run goes on, not what it computes") {
  for (const char* key : {"type", "workers", "collective", "bucket_mb"})
    CHECK(changeableOnResume("strategy", key));
  for (const char* key : {"hosts", "coordinator", "token", "token_file"})
    CHECK(changeableOnResume("cluster", key));
  CHECK(changeableOnResume("job", "threads"));
  CHECK(changeableOnResume("job", "device"));
  // How the devices compute: the precision, the CPU's bf16 demand, the GPU's algorithms and workspace.
  for (const char* key : {"precision", "cpu_bf16", "deterministic", "gpu_workspace_mb", "cuda_graphs"})
    CHECK(changeableOnResume("job", key));
  for (const char* key : {"steps", "epochs", "checkpoint_every_steps", "keep_last", "eval_every_steps"})
    CHECK(changeableOnResume("train", key));
  CHECK_FALSE(changeableOnResume("train", "batch_size"));
  CHECK_FALSE(changeableOnResume("train", "grad_clip_norm"));
  CHECK_FALSE(changeableOnResume("job", "seed"));
  CHECK_FALSE(changeableOnResume("job", "run_dir"));
  CHECK_FALSE(changeableOnResume("model", "preset"));
  CHECK_FALSE(changeableOnResume("model", "layers"));
  CHECK_FALSE(changeableOnResume("data", "dir"));
  CHECK_FALSE(changeableOnResume("optimizer", "lr"));
  CHECK_FALSE(changeableOnResume("schedule", "type"));
}

TEST_CASE("resume --set applies the execution keys and the run's length") {
  JobConfig job = saved();
  applyResumeOverrides(job, {"strategy.workers=3", "job.threads=2", "train.epochs=4", "train.keep_last=1"});
  CHECK(job.strategy.workers == 3);
  CHECK(job.job.threads == 2);
  CHECK(job.train.epochs == 4);
  CHECK(job.train.keep_last == 1);
  CHECK(job.posOf("strategy.workers").str() == "--set strategy.workers=3");
  CHECK(job.optimizer.lr == 0.003);  // untouched
}

TEST_CASE("resume --set and --job change how the GPU computes: algorithms and their workspace") {
  JobConfig job = saved();
  REQUIRE(job.job.deterministic);
  applyResumeOverrides(job, {"job.deterministic=false", "job.gpu_workspace_mb=64"});
  CHECK_FALSE(job.job.deterministic);
  CHECK(job.job.gpu_workspace_mb == 64);
  CHECK(job.posOf("job.gpu_workspace_mb").str() == "--set job.gpu_workspace_mb=64");

  std::string next = kBody;
  next.insert(next.find("threads = 1\n") + 12, "deterministic = false\ngpu_workspace_mb = 32\n");
  JobConfig file_job = parseJobString(next, "next.toml");
  JobConfig resumed = withChangesFrom(saved(), file_job);
  CHECK_FALSE(resumed.job.deterministic);
  CHECK(resumed.job.gpu_workspace_mb == 32);
  CHECK(resumed.posOf("job.gpu_workspace_mb").origin == "next.toml");
}

TEST_CASE("resume --set of a key the checkpoint was trained with is refused in one line") {
  const std::string tail =
      " cannot change on resume: the checkpoint was trained with it; start a new run with `dtrain train` to "
      "change it (resume may change [strategy], [cluster], job.threads, job.device, job.precision, "
      "job.cpu_bf16, job.deterministic, job.gpu_workspace_mb, job.cuda_graphs, train.steps, train.epochs, train.loss_scale_* "
      "and the eval, checkpoint and log cadence)";
  JobConfig job = saved();
  CHECK(configErrorOf([&] { applyResumeOverrides(job, {"model.preset=cnn"}); }) ==
        "--set model.preset=cnn: [model] preset" + tail);
  CHECK(configErrorOf([&] {
          applyResumeOverrides(job, {"strategy.workers=3", "train.batch_size=64"});
        }) == "--set train.batch_size=64: [train] batch_size" + tail);
  CHECK(configErrorOf([&] { applyResumeOverrides(job, {"job.seed=1"}); }) ==
        "--set job.seed=1: [job] seed" + tail);
  CHECK(configErrorOf([&] { applyResumeOverrides(job, {"model.layers=[]"}); }) ==
        "--set model.layers=[]: [model] layers" + tail);
  // Refused before anything is applied.
  CHECK(job.strategy.workers == 2);
  // A misspelt key still gets the usual "did you mean".
  CHECK(configErrorOf([&] { applyResumeOverrides(job, {"strategy.worker=3"}); }) ==
        "--set strategy.worker=3: [strategy] unknown key 'worker' (did you mean 'workers'?)");
}

TEST_CASE("resume --set strategy.type to one process or one host drops a [cluster] it cannot use") {
  JobConfig one = saved(kTwoHosts);
  applyResumeOverrides(one, {"strategy.type=one_device", "job.threads=1"});
  CHECK(one.strategy.type == "one_device");
  CHECK_FALSE(one.cluster.present);
  CHECK(one.cluster.hosts.empty());
  CHECK(one.positions.count("cluster") == 0);
  CHECK_NOTHROW(dtrain::validateJob(one));

  JobConfig local = saved(kTwoHosts);
  applyResumeOverrides(local, {"strategy.type=mirrored", "strategy.workers=3"});
  CHECK_FALSE(local.cluster.present);
  CHECK_NOTHROW(dtrain::validateJob(local));

  // With a cluster key set too, the user described the cluster: it stays (and validation speaks).
  JobConfig kept = saved(kTwoHosts);
  applyResumeOverrides(kept, {"strategy.type=mirrored", "cluster.hosts=10.0.0.1:3"});
  CHECK(kept.cluster.present);
  CHECK(kept.cluster.hosts.size() == 1);
}

TEST_CASE("an inline token stored as <hidden> must be given again, in any of three ways") {
  JobConfig job = saved(kTwoHosts);
  CHECK(needsTokenAgain(job));
  CHECK(dtrain::tokenAgainMessage("runs/small") ==
        "[cluster] token was given inline, and checkpoints do not store it (state.toml shows \"<hidden>\"); "
        "give it again: `dtrain resume runs/small --job FILE` with the job file that holds it, --set "
        "cluster.token=..., or --set cluster.token_file=PATH");

  JobConfig by_token = saved(kTwoHosts);
  applyResumeOverrides(by_token, {"cluster.token=s3cret"});
  CHECK(by_token.cluster.token == "s3cret");
  CHECK_FALSE(needsTokenAgain(by_token));

  // token_file replaces the hidden inline token rather than conflicting with it.
  TempDir dir("resume_token");
  const std::string file = dir / "token";
  std::ofstream(file) << "s3cret\n";
  JobConfig by_file = saved(kTwoHosts);
  applyResumeOverrides(by_file, {"cluster.token_file=" + file});
  CHECK(by_file.cluster.token.empty());
  CHECK(by_file.cluster.token_file == file);
  CHECK_FALSE(needsTokenAgain(by_file));
  CHECK_NOTHROW(dtrain::validateJob(by_file));

  // A one-host mirrored job has no [cluster] and so no token to give.
  CHECK_FALSE(needsTokenAgain(saved()));
}

TEST_CASE("resume --job takes [strategy], [cluster] and threads from the file; the rest must match") {
  const std::string next_text =
      "[job]\nname = \"small\"\nrun_dir = \"elsewhere\"\nthreads = 2\n"
      "[model]\npreset = \"mlp\"\nhidden = [64, 32]\n"
      "[data]\ndataset = \"synthetic\"\n"
      "[train]\nepochs = 3\nbatch_size = 48\n"
      "[optimizer]\ntype = \"adamw\"\nlr = 0.003\n" +
      std::string(
          "[strategy]\ntype = \"multi_worker_mirrored\"\n"
          "[cluster]\ncoordinator = \"10.0.0.1:29500\"\ntoken = \"s3cret\"\n"
          "hosts = [{ address = \"10.0.0.1\", slots = 3 }]\n");
  JobConfig job = withChangesFrom(saved(), parseJobString(next_text, "next.toml"));
  CHECK(job.strategy.type == "multi_worker_mirrored");
  CHECK(job.cluster.present);
  REQUIRE(job.cluster.hosts.size() == 1);
  CHECK(job.cluster.hosts[0].slots == 3);
  CHECK(job.cluster.token == "s3cret");
  CHECK(job.job.threads == 2);
  CHECK(job.train.epochs == 3);
  CHECK(job.job.run_dir == "runs/small");  // the run continues where its checkpoints are
  CHECK(job.posOf("cluster.hosts").origin == "next.toml");
  CHECK(job.posOf("cluster.hosts").line == 21);
  CHECK_NOTHROW(dtrain::validateJob(job));

  // Back to one host: a file without [cluster] removes it.
  JobConfig local = withChangesFrom(saved(kTwoHosts), parseJobString(kBody, "local.toml"));
  CHECK(local.strategy.type == "one_device");
  CHECK_FALSE(local.cluster.present);
}

TEST_CASE("resume --job refuses a file that differs elsewhere, naming the first key and both values") {
  const std::string changed_lr =
      "[job]\nname = \"small\"\nrun_dir = \"runs/small\"\nthreads = 1\n"
      "[model]\npreset = \"mlp\"\nhidden = [64, 32]\n"
      "[data]\ndataset = \"synthetic\"\n"
      "[train]\nepochs = 2\nbatch_size = 48\n"
      "[optimizer]\ntype = \"adamw\"\nlr = 0.01\n";
  const std::string tail =
      "; resume takes only [strategy], [cluster], job.threads, job.device, job.precision, job.cpu_bf16, "
      "job.deterministic, job.gpu_workspace_mb, job.cuda_graphs, train.steps, train.epochs, train.loss_scale_* and the eval, "
      "checkpoint and log cadence from --job FILE: make the rest match, or start a new run with `dtrain train`";
  CHECK(configErrorOf([&] { withChangesFrom(saved(), parseJobString(changed_lr, "next.toml")); }) ==
        "next.toml:15:6: [optimizer] lr is 0.01 here, but the checkpoint was trained with 0.003" + tail);
  // A key left at its default is named at the file.
  std::string unnamed = kBody;
  unnamed.erase(unnamed.find("name = \"small\"\n"), 15);
  CHECK(configErrorOf([&] { withChangesFrom(saved(), parseJobString(unnamed, "other.toml")); }) ==
        "other.toml: [job] name is \"other\" here, but the checkpoint was trained with \"small\"" + tail);
  // Layers are compared whole.
  auto withLayer = [](int units) {
    return "[job]\nname = \"small\"\n[model]\n[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\nunits = " +
           std::to_string(units) + "\n[data]\ndataset = \"synthetic\"\n";
  };
  JobConfig with_layers = parseJobString(withLayer(4), "state.toml");
  CHECK_NOTHROW(withChangesFrom(with_layers, parseJobString(withLayer(4), "same.toml")));
  CHECK(configErrorOf([&] { withChangesFrom(with_layers, parseJobString(withLayer(8), "wider.toml")); }) ==
        "wider.toml:4:1: [[model.layers]] differ from the layers the checkpoint was trained with" + tail);
}
