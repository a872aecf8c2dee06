#include "core/config/parse_job.h"

#include <doctest/doctest.h>

#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobFile;
using dtrain::parseJobString;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;
using dtrain::test::TempDir;

TEST_CASE("an empty job keeps every documented default") {
  JobConfig job = parseJobString("", "job.toml");
  JobConfig defaults;
  CHECK(job.source_path == "job.toml");
  CHECK(job.job.seed == defaults.job.seed);
  CHECK(job.job.threads == 0);
  CHECK(job.job.device == "cpu");
  CHECK(job.job.precision == "fp32");
  CHECK(job.job.deterministic);
  CHECK(job.job.gpu_workspace_mb == 1024);
  CHECK(job.job.cuda_graphs);
  CHECK(job.model.preset == "");
  CHECK(job.model.hidden == std::vector<int64_t>{512, 256});
  CHECK(job.model.init == "he");
  CHECK(job.data.dataset == "fashion_mnist");
  CHECK(job.data.dir == defaults.data.dir);
  CHECK(job.data.shape == std::vector<int64_t>{1, 28, 28});
  CHECK(job.train.epochs == 10);
  CHECK(job.train.batch_size == 128);
  CHECK(job.train.log_every_seconds == 5.0);
  CHECK(job.optimizer.type == "sgd");
  CHECK(job.optimizer.lr == 0.05);
  CHECK(job.optimizer.eps == 1e-8);
  CHECK(job.schedule.type == "constant");
  CHECK(job.strategy.type == "one_device");
  CHECK(job.positions.empty());
  CHECK(job.posOf("optimizer.lr").str() == "job.toml");
  CHECK(job.posOf("optimizer.lr").line == 0);
}

TEST_CASE("values are read with their positions") {
  JobConfig job = parseJobString(
      "[job]\n"
      "seed = 7\n"
      "threads = 4\n"
      "\n"
      "[model]\n"
      "preset = \"mlp\"\n"
      "hidden = [256, 128]\n"
      "\n"
      "[optimizer]\n"
      "type = \"adam\"\n"
      "  lr = 1\n"
      "nesterov = true\n",
      "configs/job.toml");
  CHECK(job.job.seed == 7);
  CHECK(job.job.threads == 4);
  CHECK(job.model.preset == "mlp");
  CHECK(job.model.hidden == std::vector<int64_t>{256, 128});
  CHECK(job.optimizer.type == "adam");
  CHECK(job.optimizer.lr == 1.0);  // an integer is fine for a float
  CHECK(job.optimizer.nesterov);
  CHECK(job.posOf("optimizer.lr").str() == "configs/job.toml:11:8");
  CHECK(job.posOf("job.seed").str() == "configs/job.toml:2:8");
  CHECK(job.posOf("optimizer").str() == "configs/job.toml:9:1");
  CHECK(job.posOf("train.epochs").str() == "configs/job.toml");
}

TEST_CASE("a negative seed keeps its bits") {
  JobConfig job = parseJobString("[job]\nseed = -1\n", "job.toml");
  CHECK(job.job.seed == UINT64_MAX);
}

TEST_CASE("job name and run directory default from the file name") {
  TempDir dir;
  std::filesystem::create_directories(dir.file("configs"));
  std::string path = dir.write("configs/fashion_cnn.toml", kMinimalJob);
  JobConfig job = parseJobFile(path);
  CHECK(job.source_path == path);
  CHECK(job.job.name == "fashion_cnn");
  CHECK(job.job.run_dir == "runs/fashion_cnn");

  JobConfig named = parseJobString("[job]\nname = \"exp1\"\n", "configs/fashion_cnn.toml");
  CHECK(named.job.name == "exp1");
  CHECK(named.job.run_dir == "runs/exp1");

  JobConfig both = parseJobString("[job]\nname = \"exp1\"\nrun_dir = \"/tmp/out\"\n", "a.toml");
  CHECK(both.job.run_dir == "/tmp/out");

  JobConfig renamed = parseJobString("", "a.toml", {"job.name=exp2"});
  CHECK(renamed.job.name == "exp2");
  CHECK(renamed.job.run_dir == "runs/exp2");
}

TEST_CASE("explicit layers are read with their options") {
  JobConfig job = parseJobString(
      "[model]\n"
      "[[model.layers]]\n"
      "name = \"conv1\"\n"
      "type = \"conv2d\"\n"
      "filters = 32\n"
      "kernel = [3, 3]\n"
      "\n"
      "[[model.layers]]\n"
      "name = \"head\"\n"
      "type = \"dense\"\n"
      "inputs = [\"conv1\"]\n"
      "rate = 0.5\n"
      "bias = false\n"
      "activation = \"relu\"\n",
      "job.toml");
  REQUIRE(job.model.layers.size() == 2);
  const dtrain::LayerSpec& conv = job.model.layers[0];
  CHECK(conv.name == "conv1");
  CHECK(conv.type == "conv2d");
  CHECK(conv.inputs.empty());
  CHECK(conv.pos.str() == "job.toml:2:1");
  CHECK(conv.options.getInt("filters") == 32);
  CHECK(conv.options.getPair("kernel") == std::pair<int64_t, int64_t>{3, 3});
  CHECK(conv.options.entries().at("filters").pos.str() == "job.toml:5:11");
  CHECK(conv.options.has("name") == false);
  const dtrain::LayerSpec& head = job.model.layers[1];
  CHECK(head.inputs == std::vector<std::string>{"conv1"});
  CHECK(head.options.getFloat("rate") == 0.5);
  CHECK(head.options.getBool("bias") == false);
  CHECK(head.options.getString("activation") == "relu");
  CHECK(job.posOf("model.layers").str() == "job.toml:2:1");
}

TEST_CASE("unknown keys and sections are reported with a suggestion") {
  CHECK(configErrorOf([] { parseJobString("[optimizer]\ntype = \"sgd\"\nlr_rate = 0.1\n", "job.toml"); }) ==
        "job.toml:3:1: [optimizer] unknown key 'lr_rate' (did you mean 'lr'?)");
  CHECK(configErrorOf([] { parseJobString("[optimizer]\nlerning_rate = 0.1\n", "job.toml"); }) ==
        "job.toml:2:1: [optimizer] unknown key 'lerning_rate'");
  CHECK(configErrorOf([] { parseJobString("[train]\nepochs = 2\n\n[optimiser]\nlr = 0.1\n", "job.toml"); }) ==
        "job.toml:4:1: unknown section [optimiser] (did you mean [optimizer]?)");
  CHECK(configErrorOf([] { parseJobString("[fancy]\n", "job.toml"); }) ==
        "job.toml:1:1: unknown section [fancy]");
  CHECK(configErrorOf([] { parseJobString("[train.extra]\nx = 1\n", "job.toml"); }) ==
        "job.toml:1:8: [train] unknown key 'extra'");
}

TEST_CASE("a key above every section header says where it belongs") {
  CHECK(configErrorOf([] { parseJobString("lr = 0.1\n", "job.toml"); }) ==
        "job.toml:1:1: key 'lr' is outside any section; put it under [optimizer]");
  CHECK(
      configErrorOf([] { parseJobString("type = \"sgd\"\n", "job.toml"); }) ==
      "job.toml:1:1: key 'type' is outside any section; put it under [optimizer], [schedule] or [strategy]");
  CHECK(configErrorOf([] { parseJobString("foo = 1\n", "job.toml"); }) ==
        "job.toml:1:1: key 'foo' is outside any section; keys go under a section header such as [train]");
  CHECK(configErrorOf([] { parseJobString("train = 5\n", "job.toml"); }) ==
        "job.toml:1:9: [train] must be a table (got integer 5)");
}

TEST_CASE("values of the wrong type name the key, the value and the expected type") {
  CHECK(configErrorOf([] { parseJobString("[train]\nsteps = 5\nepochs = \"ten\"\n", "job.toml"); }) ==
        "job.toml:3:10: [train] epochs must be an integer (got string \"ten\")");
  CHECK(configErrorOf([] { parseJobString("[train]\nbatch_size = 1.5\n", "job.toml"); }) ==
        "job.toml:2:14: [train] batch_size must be an integer (got float 1.5)");
  CHECK(configErrorOf([] { parseJobString("[optimizer]\nlr = \"fast\"\n", "job.toml"); }) ==
        "job.toml:2:6: [optimizer] lr must be a float (got string \"fast\")");
  CHECK(configErrorOf([] { parseJobString("[data]\nshuffle = 1\n", "job.toml"); }) ==
        "job.toml:2:11: [data] shuffle must be a boolean (true or false) (got integer 1)");
  CHECK(configErrorOf([] { parseJobString("[job]\ndeterministic = \"yes\"\n", "job.toml"); }) ==
        "job.toml:2:17: [job] deterministic must be a boolean (true or false) (got string \"yes\")");
  CHECK(configErrorOf([] { parseJobString("[job]\ngpu_workspace_mb = 0.5\n", "job.toml"); }) ==
        "job.toml:2:20: [job] gpu_workspace_mb must be an integer (got float 0.5)");
  CHECK(configErrorOf([] { parseJobString("[data]\ndir = 3\n", "job.toml"); }) ==
        "job.toml:2:7: [data] dir must be a string (got integer 3)");
  CHECK(configErrorOf([] { parseJobString("[model]\nhidden = 256\n", "job.toml"); }) ==
        "job.toml:2:10: [model] hidden must be an array of integers (got integer 256)");
  CHECK(configErrorOf([] { parseJobString("[model]\nhidden = [256, \"a\"]\n", "job.toml"); }) ==
        "job.toml:2:16: [model] hidden[1] must be an integer (got string \"a\")");
  CHECK(configErrorOf([] { parseJobString("[job]\nthreads = 9999999999\n", "job.toml"); }) ==
        "job.toml:2:11: [job] threads must be an integer between -2147483648 and 2147483647 (got integer "
        "9999999999)");
  CHECK(configErrorOf([] { parseJobString("[job]\nname = 2024-01-01\n", "job.toml"); }) ==
        "job.toml:2:8: [job] name must be a string (got date 2024-01-01)");
}

TEST_CASE("malformed layer entries are reported") {
  CHECK(configErrorOf([] { parseJobString("[model]\nlayers = 3.5\n", "job.toml"); }) ==
        "job.toml:2:10: [model] layers must be an array of tables ([[model.layers]]) (got float 3.5)");
  CHECK(configErrorOf([] { parseJobString("[model]\nlayers = [1]\n", "job.toml"); }) ==
        "job.toml:2:11: [model] layers[0] must be a table (got integer 1)");
  CHECK(configErrorOf([] { parseJobString("[[model.layers]]\ntype = \"dense\"\n", "job.toml"); }) ==
        "job.toml:1:1: [model.layers] entry 1 needs 'name'");
  CHECK(configErrorOf([] { parseJobString("[[model.layers]]\nname = 5\n", "job.toml"); }) ==
        "job.toml:2:8: [model.layers] entry 1 name must be a string (got integer 5)");
  CHECK(configErrorOf([] { parseJobString("[[model.layers]]\nname = \"fc\"\n", "job.toml"); }) ==
        "job.toml:1:1: [model.layers] 'fc' needs 'type'");
  CHECK(configErrorOf([] {
          parseJobString("[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\ninputs = \"x\"\n", "job.toml");
        }) == "job.toml:4:10: [model.layers] 'fc' inputs must be an array of strings (got string \"x\")");
  CHECK(configErrorOf([] {
          parseJobString("[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\ninputs = [\"a\", 2]\n",
                         "job.toml");
        }) == "job.toml:4:16: [model.layers] 'fc' inputs[1] must be a string (got integer 2)");
  CHECK(configErrorOf([] {
          parseJobString("[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\nsize = [1, \"a\"]\n",
                         "job.toml");
        }) ==
        "job.toml:4:8: [model.layers] 'fc' size must be an integer, float, boolean, string or array of "
        "integers "
        "(got array [1, \"a\"])");
  CHECK(configErrorOf([] {
          parseJobString("[[model.layers]]\nname = \"fc\"\ntype = \"dense\"\nextra = {a = 1}\n", "job.toml");
        }) ==
        "job.toml:4:9: [model.layers] 'fc' extra must be an integer, float, boolean, string or array of "
        "integers "
        "(got table)");
}

TEST_CASE("TOML syntax errors carry line and column") {
  std::string msg = configErrorOf([] { parseJobString("[train]\nepochs = 3\nsteps = = 2\n", "job.toml"); });
  CHECK(msg.rfind("job.toml:3:9: TOML syntax error: ", 0) == 0);
  CHECK(msg == "job.toml:3:9: TOML syntax error: Error while parsing value: could not determine value type");
}

TEST_CASE("a job file that cannot be read is reported") {
  TempDir dir;
  std::string missing = dir.file("job.toml");
  CHECK(configErrorOf([&] { parseJobFile(missing); }) ==
        missing + ": cannot read job file (No such file or directory)");
  CHECK(configErrorOf([&] { parseJobFile(dir.path()); }) ==
        dir.path() + ": cannot read job file (Is a directory)");
}

TEST_CASE("a syntax error in a job file names the file") {
  TempDir dir;
  std::string path = dir.write("bad.toml", "[train]\nepochs = [1,\n");
  std::string msg = configErrorOf([&] { parseJobFile(path); });
  CHECK(msg == path + ":2:14: TOML syntax error: Error while parsing array: encountered end-of-file");
}

TEST_CASE("the shipped example jobs parse and validate") {
  TempDir data;  // stands in for the dataset folder, which a test machine may lack
  for (const char* name : {"fashion_mlp", "fashion_cnn"}) {
    CAPTURE(name);
    std::string path = std::string(DTRAIN_SOURCE_DIR) + "/configs/" + name + ".toml";
    JobConfig job = parseJobFile(path, {"data.dir=" + data.path()});
    CHECK(job.job.name == name);
    CHECK(job.data.dataset == "fashion_mnist");
    CHECK_NOTHROW(dtrain::validateJob(job));
  }
}
