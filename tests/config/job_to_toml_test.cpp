#include "core/config/job_to_toml.h"

#include <doctest/doctest.h>

#include <sstream>

#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::jobToTable;
using dtrain::jobToToml;
using dtrain::parseJobString;
using dtrain::parseJobTable;

namespace {

// Every field away from its default, and layers with every kind of option.
JobConfig unusualJob() {
  JobConfig job = parseJobString(
      "[model]\n"
      "[[model.layers]]\n"
      "name = \"conv 1\"\n"
      "type = \"conv2d\"\n"
      "filters = 32\n"
      "kernel = [3, 5]\n"
      "\"odd key\" = \"say \\\"hi\\\"\\n\"\n"
      "[[model.layers]]\n"
      "name = \"head\"\n"
      "type = \"dense\"\n"
      "inputs = [\"conv 1\", \"x\"]\n"
      "rate = 0.1\n"
      "bias = false\n"
      "empty = []\n",
      "configs/unusual.toml");
  job.job.name = "unusual";
  job.job.run_dir = "/tmp/runs/unusual";
  job.job.seed = UINT64_MAX - 5;
  job.job.threads = 3;
  job.job.device = "auto";
  job.job.precision = "tf32";
  job.job.deterministic = false;
  job.job.gpu_workspace_mb = 77;
  job.model.preset = "cnn";
  job.model.hidden = {1024, 10, 3};
  job.model.dropout = 0.3;
  job.model.init = "glorot";
  job.data.dataset = "idx";
  job.data.dir = "C:\\data\\\"fashion\"";
  job.data.train_samples = 123;
  job.data.test_samples = 45;
  job.data.shape = {3, 32, 30};
  job.data.classes = 7;
  job.data.shuffle = false;
  job.data.prefetch = 9;
  job.train.epochs = 11;
  job.train.steps = 12345;
  job.train.batch_size = 77;
  job.train.eval_batch_size = 99;
  job.train.eval_every_steps = 500;
  job.train.eval_every_epoch = false;
  job.train.checkpoint_every_steps = 250;
  job.train.checkpoint_every_epoch = false;
  job.train.keep_last = 8;
  job.train.log_every_seconds = 0.5;
  job.train.grad_clip_norm = 1.0;
  job.optimizer.type = "adamw";
  job.optimizer.lr = 0.1 + 0.2;  // not a short decimal: must still read back exactly
  job.optimizer.momentum = 0.95;
  job.optimizer.nesterov = true;
  job.optimizer.weight_decay = 5e-4;
  job.optimizer.beta1 = 0.8;
  job.optimizer.beta2 = 0.9999;
  job.optimizer.eps = 1e-12;
  job.schedule.type = "step";
  job.schedule.warmup_steps = 100;
  job.schedule.step_every = 2000;
  job.schedule.gamma = 0.5;
  job.schedule.min_lr = 1e-6;
  job.strategy.type = "multi_worker_mirrored";
  job.strategy.workers = 5;
  job.strategy.collective = "halving_doubling";
  job.strategy.bucket_mb = 0.1 + 0.2;
  job.cluster.present = true;
  job.cluster.coordinator = "[fe80::1]:29500";
  job.cluster.token_file = "/etc/dtrain/\"token\"";
  job.cluster.hosts = {{"10.0.0.1", 2, {}}, {"node-2.example", 64, {}}, {"fe80::2", 1, {}}};
  job.cluster.join_timeout_s = 12.5;
  job.cluster.heartbeat_interval_s = 0.25;
  job.cluster.heartbeat_timeout_s = 3;
  job.cluster.collective_timeout_s = 1e-3;
  return job;
}

void checkSameJob(const JobConfig& a, const JobConfig& b) {
  CHECK(a.job.name == b.job.name);
  CHECK(a.job.run_dir == b.job.run_dir);
  CHECK(a.job.seed == b.job.seed);
  CHECK(a.data.dir == b.data.dir);
  CHECK(a.data.shape == b.data.shape);
  CHECK(a.optimizer.lr == b.optimizer.lr);
  CHECK(a.optimizer.eps == b.optimizer.eps);
  CHECK(a.schedule.min_lr == b.schedule.min_lr);
  CHECK(a.strategy.type == b.strategy.type);
  CHECK(a.strategy.workers == b.strategy.workers);
  CHECK(a.strategy.collective == b.strategy.collective);
  CHECK(a.strategy.bucket_mb == b.strategy.bucket_mb);
  CHECK(a.cluster.present == b.cluster.present);
  CHECK(a.cluster.coordinator == b.cluster.coordinator);
  CHECK(a.cluster.token_file == b.cluster.token_file);
  CHECK(a.cluster.join_timeout_s == b.cluster.join_timeout_s);
  CHECK(a.cluster.heartbeat_interval_s == b.cluster.heartbeat_interval_s);
  CHECK(a.cluster.heartbeat_timeout_s == b.cluster.heartbeat_timeout_s);
  CHECK(a.cluster.collective_timeout_s == b.cluster.collective_timeout_s);
  REQUIRE(a.cluster.hosts.size() == b.cluster.hosts.size());
  for (size_t i = 0; i < a.cluster.hosts.size(); ++i) {
    CHECK(a.cluster.hosts[i].address == b.cluster.hosts[i].address);
    CHECK(a.cluster.hosts[i].slots == b.cluster.hosts[i].slots);
  }
  REQUIRE(a.model.layers.size() == b.model.layers.size());
  for (size_t i = 0; i < a.model.layers.size(); ++i) {
    const dtrain::LayerSpec& x = a.model.layers[i];
    const dtrain::LayerSpec& y = b.model.layers[i];
    CHECK(x.name == y.name);
    CHECK(x.type == y.type);
    CHECK(x.inputs == y.inputs);
    REQUIRE(x.options.entries().size() == y.options.entries().size());
    for (const auto& [key, entry] : x.options.entries()) {
      REQUIRE(y.options.has(key));
      CHECK(entry.value == y.options.entries().at(key).value);
    }
  }
  // The writer covers every field, so equal text means equal configs.
  CHECK(jobToToml(a) == jobToToml(b));
}

}  // namespace

TEST_CASE("jobToToml writes every field in job_config.h order") {
  JobConfig job = parseJobString(dtrain::test::kMinimalJob, "configs/small.toml");
  const std::string expected =
      "[job]\n"
      "name = \"small\"\n"
      "run_dir = \"runs/small\"\n"
      "seed = 42\n"
      "threads = 0\n"
      "device = \"cpu\"\n"
      "precision = \"fp32\"\n"
      "memory_limit_mb = 0.0\n"
      "cpu_bf16 = \"auto\"\n"
      "deterministic = true\n"
      "gpu_workspace_mb = 1024\n"
      "cuda_graphs = true\n"
      "\n"
      "[model]\n"
      "preset = \"mlp\"\n"
      "hidden = [512, 256]\n"
      "dropout = 0.0\n"
      "init = \"he\"\n"
      "depth = 20\n"
      "width = 1.0\n"
      "heads = 6\n"
      "dim = 384\n"
      "context = 256\n"
      "vocab = 0\n"
      "tie_embeddings = true\n"
      "\n"
      "[data]\n"
      "dataset = \"synthetic\"\n"
      "dir = \"" +
      job.data.dir +
      "\"\n"
      "train_samples = 6000\n"
      "test_samples = 1000\n"
      "shape = [1, 28, 28]\n"
      "classes = 10\n"
      "shuffle = true\n"
      "prefetch = 2\n"
      "loader_threads = 0\n"
      "device_cache_mb = -1\n"
      "validation_dir = \"\"\n"
      "validation_fraction = 0.1\n"
      "split_seed = 0\n"
      "image_size = [224, 224]\n"
      "channels = 3\n"
      "bad_images = \"skip\"\n"
      "files = \"\"\n"
      "validation_files = \"\"\n"
      "context = 256\n"
      "vocab = 50257\n"
      "pad_id = -1\n"
      "mean = []\n"
      "std = []\n"
      "augment_flip = false\n"
      "augment_crop_padding = 0\n"
      "augment_resized_crop = false\n"
      "augment_scale = [0.08, 1.0]\n"
      "augment_ratio = [0.75, 1.333333]\n"
      "\n"
      "[train]\n"
      "epochs = 10\n"
      "steps = 0\n"
      "batch_size = 128\n"
      "accumulate = 1\n"
      "eval_batch_size = 1000\n"
      "eval_every_steps = 0\n"
      "eval_every_epoch = true\n"
      "checkpoint_every_steps = 0\n"
      "checkpoint_every_epoch = true\n"
      "keep_last = 3\n"
      "log_every_seconds = 5.0\n"
      "grad_clip_norm = 0.0\n"
      "label_smoothing = 0.0\n"
      "loss_scale_initial = 65536.0\n"
      "loss_scale_growth_interval = 2000\n"
      "loss_scale_backoff = 0.5\n"
      "loss_scale_growth = 2.0\n"
      "\n"
      "[optimizer]\n"
      "type = \"sgd\"\n"
      "lr = 0.05\n"
      "momentum = 0.9\n"
      "nesterov = false\n"
      "weight_decay = 0.0\n"
      "decay_1d = false\n"
      "decay_embeddings = false\n"
      "beta1 = 0.9\n"
      "beta2 = 0.999\n"
      "eps = 1e-08\n"
      "\n"
      "[schedule]\n"
      "type = \"constant\"\n"
      "warmup_steps = 0\n"
      "step_every = 1000\n"
      "gamma = 0.1\n"
      "min_lr = 0.0\n"
      "\n"
      "[strategy]\n"
      "type = \"one_device\"\n"
      "workers = 2\n"
      "ps = 1\n"
      "consistency = \"sync\"\n"
      "staleness = 2\n"
      "scale_lr_by_staleness = false\n"
      "min_workers = 1\n"
      "gradient_push = \"auto\"\n"
      "collective = \"auto\"\n"
      "bucket_mb = 4.0\n"
      "backend = \"auto\"\n"
      "sync_batchnorm = false\n"
      "stage = 2\n"
      "stages = 2\n"
      "micro_batches = 4\n"
      "schedule = \"1f1b\"\n"
      "replicas = 1\n"
      "stage_memory_mb = 0.0\n"
      "split_by = \"time\"\n"
      "rebalance_after_steps = 3\n";
  CHECK(jobToToml(job) == expected);
}

TEST_CASE("jobToToml round-trips through parseJobString") {
  JobConfig job = unusualJob();
  std::string text = jobToToml(job);
  CHECK(text.find("\n[[model.layers]]\nname = \"conv 1\"\ntype = \"conv2d\"\ninputs = []\n") !=
        std::string::npos);
  CHECK(text.find("\"odd key\" = \"say \\\"hi\\\"\\n\"\n") != std::string::npos);
  JobConfig back = parseJobString(text, "resolved.toml");
  checkSameJob(job, back);
  CHECK(back.job.seed == UINT64_MAX - 5);
  CHECK(back.optimizer.lr == 0.1 + 0.2);
  CHECK(back.model.layers[0].options.getString("odd key") == "say \"hi\"\n");
  CHECK(back.model.layers[1].options.entries().at("empty").value ==
        dtrain::LayerOptions::Value{std::vector<int64_t>{}});
}

TEST_CASE("a resolved default job round-trips and still validates") {
  JobConfig job = parseJobString(dtrain::test::kMinimalJob, "job.toml", {"train.steps=5"});
  JobConfig back = parseJobString(jobToToml(job), "job.toml");
  checkSameJob(job, back);
  CHECK_NOTHROW(dtrain::validateJob(back));
}

TEST_CASE("jobToTable round-trips through parseJobTable") {
  JobConfig job = unusualJob();
  toml::table table = jobToTable(job);
  CHECK(table.contains("job"));
  CHECK(table["model"]["layers"].as_array()->size() == 2);
  JobConfig back = parseJobTable(table, "state.toml");
  checkSameJob(job, back);
  // What a checkpoint does: write the table out with its own [state], read it back.
  table.insert("state", toml::table{{"step", 100}});
  std::ostringstream os;
  os << table;
  toml::table reread = toml::parse(os.str());
  reread.erase("state");
  checkSameJob(job, parseJobTable(reread, "state.toml"));
}

TEST_CASE("a pipeline's named stages round-trip as [[strategy.stages]] tables, in text and as a table") {
  const std::string text = std::string(dtrain::test::kMinimalJob) +
                           "\n[strategy]\ntype = \"pipeline\"\nmicro_batches = 4\n"
                           "[[strategy.stages]]\nlayers = [\"fc1\", \"relu1\"]\n"
                           "[[strategy.stages]]\nlayers = [\"fc2\"]\n";
  JobConfig job = parseJobString(text, "job.toml");
  REQUIRE(job.strategy.stage_layers.size() == 2);
  CHECK(job.strategy.stages == 2);
  CHECK(job.strategy.stage_layers[0] == std::vector<std::string>{"fc1", "relu1"});
  const std::string written = jobToToml(job);
  CHECK(written.find("\n[[strategy.stages]]\nlayers = [\"fc1\", \"relu1\"]\n") != std::string::npos);
  CHECK(written.find("\nstages = ") == std::string::npos);  // the tables give the count
  JobConfig back = parseJobString(written, "job.toml");
  CHECK(back.strategy.stage_layers == job.strategy.stage_layers);
  CHECK(back.strategy.stages == 2);
  JobConfig from_table = parseJobTable(jobToTable(job), "state.toml");
  CHECK(from_table.strategy.stage_layers == job.strategy.stage_layers);
}

TEST_CASE("a one-host job's recovery settings round-trip without giving it a [cluster] of hosts") {
  JobConfig job =
      parseJobString(dtrain::test::kMinimalJob, "job.toml",
                     {"strategy.type=mirrored", "cluster.elastic=true", "cluster.max_restarts=5"});
  CHECK_FALSE(job.cluster.present);
  const std::string text = jobToToml(job);
  CHECK(text.find("[cluster]\njoin_timeout_s = ") != std::string::npos);
  CHECK(text.find("coordinator") == std::string::npos);
  CHECK(text.find("token") == std::string::npos);
  for (const JobConfig& back :
       {parseJobString(text, "job.toml"), parseJobTable(jobToTable(job), "state.toml")}) {
    CHECK_FALSE(back.cluster.present);
    CHECK(back.cluster.elastic);
    CHECK(back.cluster.max_restarts == 5);
    CHECK_NOTHROW(dtrain::validateJob(back));
  }
  // A one-host job at every default writes no [cluster] at all.
  CHECK(jobToToml(parseJobString(dtrain::test::kMinimalJob, "job.toml")).find("[cluster]") ==
        std::string::npos);
}
