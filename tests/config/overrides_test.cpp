#include <doctest/doctest.h>

#include "core/config/parse_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;

TEST_CASE("--set overrides integers, floats, strings, booleans and arrays after the file") {
  JobConfig job = parseJobString(
      "[train]\nepochs = 3\n\n[optimizer]\nlr = 0.1\n", "job.toml",
      {"train.epochs=7", "optimizer.lr=0.02", "optimizer.type=adam", "data.shuffle=false",
       "model.hidden=[256,128]", "data.dir=/data/fashion", "job.device=\"cuda\"", " schedule.min_lr = 1 "});
  CHECK(job.train.epochs == 7);
  CHECK(job.optimizer.lr == 0.02);
  CHECK(job.optimizer.type == "adam");
  CHECK(job.data.shuffle == false);
  CHECK(job.model.hidden == std::vector<int64_t>{256, 128});
  CHECK(job.data.dir == "/data/fashion");
  CHECK(job.job.device == "cuda");
  CHECK(job.schedule.min_lr == 1.0);
  CHECK(job.posOf("optimizer.lr").str() == "--set optimizer.lr=0.02");
  CHECK(job.posOf("optimizer.lr").line == 0);
  CHECK(job.posOf("train.epochs").origin == "--set train.epochs=7");
}

TEST_CASE("later overrides win over earlier ones") {
  JobConfig job = parseJobString(kMinimalJob, "job.toml", {"train.steps=10", "train.steps=20"});
  CHECK(job.train.steps == 20);
  CHECK(job.posOf("train.steps").str() == "--set train.steps=20");
}

TEST_CASE("a malformed --set is a clear error") {
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"optimizer.lr"}); }) ==
        "--set optimizer.lr: no '=' in the override; expected section.key=value, like optimizer.lr=0.01");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"=3"}); }) ==
        "--set =3: the key before '=' is empty; expected section.key=value, like optimizer.lr=0.01");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"lr=0.1"}); }) ==
        "--set lr=0.1: 'lr' does not name a section; expected section.key=value, like optimizer.lr=0.01 "
        "(did you mean optimizer.lr?)");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"optimizer.=0.1"}); }) ==
        "--set optimizer.=0.1: the key after 'optimizer.' is empty; expected section.key=value, like "
        "optimizer.lr=0.01");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"optimiser.lr=0.1"}); }) ==
        "--set optimiser.lr=0.1: unknown section [optimiser] (did you mean [optimizer]?)");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"model.layers=[]"}); }) ==
        "--set model.layers=[]: [model] layers cannot be set with --set; write the [[model.layers]] tables "
        "in the "
        "job file");
}

TEST_CASE("--set values are type-checked like the file") {
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"optimizer.lr=abc"}); }) ==
        "--set optimizer.lr=abc: [optimizer] lr must be a float (got string \"abc\")");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"train.epochs=2.5"}); }) ==
        "--set train.epochs=2.5: [train] epochs must be an integer (got float 2.5)");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"model.hidden=[1,x]"}); }) ==
        "--set model.hidden=[1,x]: [model] hidden must be an array of integers (got string \"[1,x]\")");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"model.hidden=[1,\"x\"]"}); }) ==
        "--set model.hidden=[1,\"x\"]: [model] hidden[1] must be an integer (got string \"x\")");
  // A second line cannot sneak another key in.
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"train.steps=1\nepochs=2"}); }) ==
        "--set train.steps=1\nepochs=2: [train] steps must be an integer (got string \"1\\nepochs=2\")");
}

TEST_CASE("--set with an unknown key suggests the closest one") {
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"optimizer.lr_rate=0.1"}); }) ==
        "--set optimizer.lr_rate=0.1: [optimizer] unknown key 'lr_rate' (did you mean 'lr'?)");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"train.epoch=3"}); }) ==
        "--set train.epoch=3: [train] unknown key 'epoch' (did you mean 'epochs'?)");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"train.zzz=3"}); }) ==
        "--set train.zzz=3: [train] unknown key 'zzz'");
}
