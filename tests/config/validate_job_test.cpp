#include "core/config/validate_job.h"

#include <doctest/doctest.h>

#include "core/config/parse_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::validateJob;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;
using dtrain::test::TempDir;

namespace {

// The validation message for the minimal job plus `extra` text and overrides.
std::string validationError(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return configErrorOf([&] { validateJob(parseJobString(kMinimalJob + extra, "job.toml", overrides)); });
}

}  // namespace

TEST_CASE("the minimal job and a fully written one are valid") {
  CHECK(validationError("") == "(no ConfigError)");
  TempDir dir;
  std::string text = std::string(
                         "[job]\nname = \"full\"\nseed = 1\nthreads = 2\ndevice = \"auto\"\n"
                         "[model]\n[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\nunits = 10\n"
                         "[data]\ndataset = \"idx\"\ndir = ") +
                     "\"" + dir.path() +
                     "\"\n"
                     "[train]\nsteps = 100\nepochs = 0\n"
                     "[optimizer]\ntype = \"adamw\"\nlr = 0.001\nweight_decay = 0.01\n"
                     "[schedule]\ntype = \"cosine\"\nwarmup_steps = 10\nmin_lr = 0.0001\n"
                     "[strategy]\ntype = \"one_device\"\n";
  CHECK(configErrorOf([&] { validateJob(parseJobString(text, "job.toml")); }) == "(no ConfigError)");
}

TEST_CASE("values out of range name the position, the key and the bad value") {
  CHECK(validationError("\n[optimizer]\nlr = -0.1\n") ==
        "job.toml:8:6: [optimizer] lr must be > 0 (got -0.1)");
  CHECK(validationError("\n[train]\nbatch_size = 0\n") ==
        "job.toml:8:14: [train] batch_size must be in [1, 65536] (got 0)");
  CHECK(validationError("\n[train]\nepochs = 0\n") ==
        "job.toml:8:10: [train] epochs must be > 0 when steps is 0 (got 0)");
  CHECK(validationError("\n[train]\nkeep_last = 0\n") ==
        "job.toml:8:13: [train] keep_last must be > 0 (got 0)");
  CHECK(validationError("\n[train]\nsteps = -1\n") == "job.toml:8:9: [train] steps must be >= 0 (got -1)");
  CHECK(validationError("\n[train]\nlog_every_seconds = inf\n") ==
        "job.toml:8:21: [train] log_every_seconds must be a finite number (got inf)");
  CHECK(validationError("\n[job]\nthreads = 300\n") ==
        "job.toml:8:11: [job] threads must be in [0, 256] (got 300)");
  CHECK(validationError("\n[job]\ngpu_workspace_mb = 0\n") ==
        "job.toml:8:20: [job] gpu_workspace_mb must be in [1, 65536] (got 0)");
  CHECK(validationError("\n[job]\ngpu_workspace_mb = 65537\n") ==
        "job.toml:8:20: [job] gpu_workspace_mb must be in [1, 65536] (got 65537)");
  CHECK(validationError("\n[optimizer]\nmomentum = 1.0\n") ==
        "job.toml:8:12: [optimizer] momentum must be in [0, 1) (got 1.0)");
  CHECK(validationError("\n[optimizer]\neps = 0\n") == "job.toml:8:7: [optimizer] eps must be > 0 (got 0.0)");
  CHECK(validationError("\n[schedule]\ngamma = 0\n") ==
        "job.toml:8:9: [schedule] gamma must be in (0, 1] (got 0.0)");
  CHECK(validationError("\n[schedule]\nmin_lr = 0.5\n") ==
        "job.toml:8:10: [schedule] min_lr must be < optimizer.lr (got 0.5, lr 0.05)");
  CHECK(validationError("prefetch = 0\n") == "job.toml:6:12: [data] prefetch must be in [1, 64] (got 0)");
}

TEST_CASE("synthetic data needs a positive size, a rank-3 shape and two classes") {
  CHECK(validationError("train_samples = 0\n") == "job.toml:6:17: [data] train_samples must be > 0 (got 0)");
  CHECK(validationError("shape = [28, 28]\n") ==
        "job.toml:6:9: [data] shape must be [channels, height, width] (got [28, 28])");
  CHECK(validationError("shape = [1, 0, 28]\n") ==
        "job.toml:6:9: [data] shape extents must be > 0 (got [1, 0, 28])");
  CHECK(validationError("classes = 1\n") == "job.toml:6:11: [data] classes must be >= 2 (got 1)");
}

TEST_CASE("enumerated values list the choices and suggest the closest") {
  CHECK(validationError("\n[optimizer]\ntype = \"adm\"\n") ==
        "job.toml:8:8: [optimizer] type must be one of 'sgd', 'adam', 'adamw' (got \"adm\"; did you mean "
        "'adam'?)");
  CHECK(validationError("\n[optimizer]\ntype = \"rmsprop\"\n") ==
        "job.toml:8:8: [optimizer] type must be one of 'sgd', 'adam', 'adamw' (got \"rmsprop\")");
  CHECK(
      validationError("\n[job]\ndevice = \"gpu\"\n") ==
      "job.toml:8:10: [job] device must be one of 'auto', 'cpu', 'cuda' (got \"gpu\"; did you mean 'cpu'?)");
  CHECK(validationError("\n[schedule]\ntype = \"cosin\"\n") ==
        "job.toml:8:8: [schedule] type must be one of 'constant', 'step', 'cosine' (got \"cosin\"; did you "
        "mean "
        "'cosine'?)");
  CHECK(validationError("", {"model.preset=resnet50"}) ==
        "--set model.preset=resnet50: [model] preset must be one of 'mlp', 'cnn', 'resnet', 'mobilenet_v2', "
        "'gpt' "
        "(got "
        "\"resnet50\"; did you mean 'resnet'?)");
  CHECK(validationError("", {"model.init=xavier"}) ==
        "--set model.init=xavier: [model] init must be one of 'he', 'glorot' (got \"xavier\")");
  CHECK(validationError("", {"data.dataset=mnist"}) ==
        "--set data.dataset=mnist: [data] dataset must be one of 'fashion_mnist', 'idx', 'cifar10', "
        "'cifar100', 'image_folder', 'synthetic', 'tokens', 'text' (got "
        "\"mnist\")");
}

TEST_CASE("nesterov needs momentum") {
  CHECK(validationError("\n[optimizer]\nmomentum = 0\nnesterov = true\n") ==
        "job.toml:9:12: [optimizer] nesterov needs momentum > 0 (got momentum 0.0)");
}

TEST_CASE("the model is either a preset or a list of layers") {
  CHECK(configErrorOf([] { validateJob(parseJobString("[data]\ndataset = \"synthetic\"\n", "job.toml")); }) ==
        "job.toml: [model] needs a preset ('mlp', 'cnn', 'resnet', 'mobilenet_v2' or 'gpt') or a list of "
        "[[model.layers]]");
  CHECK(configErrorOf([] {
          validateJob(
              parseJobString("[model]\ninit = \"he\"\n[data]\ndataset = \"synthetic\"\n", "job.toml"));
        }) ==
        "job.toml:1:1: [model] needs a preset ('mlp', 'cnn', 'resnet', 'mobilenet_v2' or 'gpt') or a list of "
        "[[model.layers]]");
  CHECK(validationError("\n[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\n") ==
        "job.toml:2:10: [model] preset 'mlp' and [[model.layers]] are both given; use one or the other");
  CHECK(validationError("", {"model.hidden=[]"}) ==
        "--set model.hidden=[]: [model] hidden must list at least one width for preset 'mlp' (got [])");
  CHECK(validationError("", {"model.hidden=[64,0]"}) ==
        "--set model.hidden=[64,0]: [model] hidden entries must be > 0 (got 0 at index 1)");
  CHECK(validationError("", {"model.dropout=1"}) ==
        "--set model.dropout=1: [model] dropout must be in [0, 1) (got 1.0)");
}

TEST_CASE("layer names are unique and not empty") {
  const char* layers =
      "[model]\n"
      "[[model.layers]]\n"
      "name = \"fc\"\n"
      "type = \"dense\"\n"
      "[[model.layers]]\n"
      "name = \"fc\"\n"
      "type = \"relu\"\n"
      "[data]\n"
      "dataset = \"synthetic\"\n";
  CHECK(configErrorOf([&] { validateJob(parseJobString(layers, "job.toml")); }) ==
        "job.toml:5:1: [model.layers] duplicate layer name 'fc' (first used at job.toml:2:1)");
  CHECK(configErrorOf([] {
          validateJob(parseJobString("[[model.layers]]\nname = \"\"\ntype = \"dense\"\n", "job.toml"));
        }) == "job.toml:1:1: [model.layers] entry 1 has an empty name");
  CHECK(configErrorOf([] {
          validateJob(parseJobString("[[model.layers]]\nname = \"fc\"\ntype = \"\"\n", "job.toml"));
        }) == "job.toml:1:1: [model.layers] 'fc' has an empty type");
}

TEST_CASE("a dataset folder must exist") {
  TempDir dir;
  std::string missing = dir.file("nope");
  std::string job = std::string("[model]\npreset = \"mlp\"\n[data]\ndir = \"") + missing + "\"\n";
  CHECK(configErrorOf([&] { validateJob(parseJobString(job, "job.toml")); }) ==
        "job.toml:4:7: [data] dir '" + missing +
            "' does not exist; install the dataset-fashion-mnist package or set dir to a folder holding the "
            "IDX "
            "files");
  CHECK(configErrorOf([&] { validateJob(parseJobString(job, "job.toml", {"data.dataset=idx"})); }) ==
        "job.toml:4:7: [data] dir '" + missing +
            "' does not exist; set dir to a folder holding the IDX files");
  std::string file = dir.write("file", "x");
  CHECK(configErrorOf([&] {
          validateJob(parseJobString("[model]\npreset = \"mlp\"\n", "job.toml", {"data.dir=" + file}));
        }) ==
        "--set data.dir=" + file + ": [data] dir '" + file +
            "' is not a directory; install the dataset-fashion-mnist package or set dir to a folder holding "
            "the IDX files");
}

TEST_CASE("strategy types: the built ones are listed, a near miss is named") {
  CHECK(validationError("\n[strategy]\ntype = \"central_storage\"\n") == "(no ConfigError)");
  CHECK(
      validationError("\n[strategy]\ntype = \"central_stororage\"\n") ==
      "job.toml:8:8: [strategy] type must be one of 'one_device', 'mirrored', 'multi_worker_mirrored', "
      "'central_storage', 'parameter_server', 'pipeline', 'sharded' (got \"central_stororage\"; did you mean "
      "'central_storage'?)");
  CHECK(validationError("\n[strategy]\ntype = \"mirored\"\n") ==
        "job.toml:8:8: [strategy] type must be one of 'one_device', 'mirrored', 'multi_worker_mirrored', "
        "'central_storage', 'parameter_server', 'pipeline', 'sharded' (got \"mirored\"; did you mean "
        "'mirrored'?)");
  CHECK(validationError("\n[strategy]\ntype = \"parameter_sever\"\n") ==
        "job.toml:8:8: [strategy] type must be one of 'one_device', 'mirrored', 'multi_worker_mirrored', "
        "'central_storage', 'parameter_server', 'pipeline', 'sharded' (got \"parameter_sever\"; did you mean "
        "'parameter_server'?)");
  CHECK(validationError("\n[strategy]\ntype = \"ring\"\n") ==
        "job.toml:8:8: [strategy] type must be one of 'one_device', 'mirrored', 'multi_worker_mirrored', "
        "'central_storage', 'parameter_server', 'pipeline', 'sharded' (got \"ring\")");
}

TEST_CASE("sharded: the stage and a worker's memory limit are checked, naming the key") {
  CHECK(validationError("\n[strategy]\ntype = \"sharded\"\nstage = 3\n", {"job.threads=1"}) ==
        "(no ConfigError)");
  CHECK(validationError("\n[strategy]\ntype = \"sharded\"\nstage = 0\n").find("[strategy] stage must be") !=
        std::string::npos);
  CHECK(validationError("", {"job.memory_limit_mb=-1"}) ==
        "--set job.memory_limit_mb=-1: [job] memory_limit_mb must be >= 0 (0: the memory cgroup's limit, if "
        "any) "
        "(got -1.0)");
  // A pipeline's stages and a parameter server's shards are not predicted: the key is refused, not ignored.
  CHECK(validationError("\n[strategy]\ntype = \"pipeline\"\n", {"job.memory_limit_mb=100"})
            .find("[job] memory_limit_mb is not checked for a pipeline's stages yet") != std::string::npos);
  CHECK(validationError("\n[strategy]\ntype = \"parameter_server\"\n", {"job.memory_limit_mb=100"})
            .find("[job] memory_limit_mb is not checked for a parameter server's") != std::string::npos);
}

TEST_CASE("parameter_server across hosts: each host's ps must add up to [strategy] ps") {
  const std::string cluster =
      "\n[cluster]\ncoordinator = \"10.0.0.1:29400\"\ntoken = \"t\"\n"
      "[[cluster.hosts]]\naddress = \"10.0.0.1\"\nslots = 2\nps = 1\n"
      "[[cluster.hosts]]\naddress = \"10.0.0.2\"\nslots = 2\n";
  const std::string ps = "\n[strategy]\ntype = \"parameter_server\"\nps = 1\n";
  CHECK(validationError(ps + cluster) == "(no ConfigError)");
  CHECK(validationError(ps + cluster, {"strategy.ps=2"})
            .find("but the [[cluster.hosts]] ps entries add up to 1") != std::string::npos);
  CHECK(validationError("\n[strategy]\ntype = \"multi_worker_mirrored\"\n" + cluster)
            .find("[cluster] hosts[0].ps places parameter-server shards, but [strategy] type is "
                  "'multi_worker_mirrored'") != std::string::npos);
  // Across hosts the workers are the hosts' slots: 4 here.
  CHECK(validationError(ps + cluster, {"strategy.min_workers=4"}) == "(no ConfigError)");
  CHECK(validationError(ps + cluster, {"strategy.min_workers=5"}).find("must be in [1, 4] (got 5)") !=
        std::string::npos);
}

TEST_CASE("parameter_server: its shard count, [cluster], clipping and min_workers are checked") {
  CHECK(validationError("", {"strategy.type=parameter_server", "strategy.ps=0"}) ==
        "--set strategy.ps=0: [strategy] ps must be in [1, 64] (got 0)");
  CHECK(
      validationError("", {"strategy.type=parameter_server", "strategy.consistency=eventual"}) ==
      "--set strategy.consistency=eventual: [strategy] consistency must be one of 'sync', 'async', 'bounded' "
      "(got \"eventual\")");
  CHECK(validationError("", {"strategy.type=parameter_server", "strategy.consistency=async",
                             "strategy.sync_batchnorm=true"})
            .find("needs workers that step together") != std::string::npos);
  CHECK(validationError("", {"strategy.type=parameter_server", "strategy.consistency=async",
                             "train.grad_clip_norm=1"}) == "(no ConfigError)");
  CHECK(validationError("", {"strategy.type=parameter_server", "train.grad_clip_norm=1"}) ==
        "(no ConfigError)");
  CHECK(validationError("",
                        {"strategy.type=parameter_server", "strategy.workers=3", "strategy.min_workers=4"}) ==
        "--set strategy.min_workers=4: [strategy] min_workers must be in [1, 3] (got 4)");
  CHECK(validationError("", {"strategy.type=parameter_server", "strategy.min_workers=0"}) ==
        "--set strategy.min_workers=0: [strategy] min_workers must be in [1, 2] (got 0)");
}

TEST_CASE("overrides and defaults are reported where they came from") {
  CHECK(validationError("", {"optimizer.lr=-0.1"}) ==
        "--set optimizer.lr=-0.1: [optimizer] lr must be > 0 (got -0.1)");
  JobConfig job = parseJobString(kMinimalJob, "job.toml");
  job.train.batch_size = 0;  // changed in code: still reported at the job file
  CHECK(configErrorOf([&] { validateJob(job); }) ==
        "job.toml: [train] batch_size must be in [1, 65536] (got 0)");
  JobConfig built;
  built.model.preset = "cnn";
  built.data.dataset = "synthetic";
  built.optimizer.lr = 0;
  CHECK(configErrorOf([&] { validateJob(built); }) == "[optimizer] lr must be > 0 (got 0.0)");
}
