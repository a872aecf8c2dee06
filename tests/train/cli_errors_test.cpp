// Bad input through the binary: one line naming the problem, a non-zero exit,
// nothing already saved lost.
#include <doctest/doctest.h>

#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

TEST_CASE("a config error is one line with file:line:col and exit code 2") {
  TempDir tmp("cli");
  writeFile(tmp / "bad.toml", "[model]\npreset = \"mlp\"\n[optimizer]\nlr = -0.1\n");
  RunResult r = runDtrain({"train", tmp / "bad.toml"});
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("bad.toml:4:6: [optimizer] lr must be > 0 (got -0.1)") != std::string::npos);
  r = runDtrain({"check", tmp / "bad.toml", "--set", "optimizer.lr=0.1", "--set", "train.epoch=3"});
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("did you mean 'epochs'") != std::string::npos);
}

TEST_CASE("missing files and corrupt data are one-line errors") {
  TempDir tmp("cli2");
  RunResult r = runDtrain({"train", tmp / "nope.toml"});
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("nope.toml") != std::string::npos);
  CHECK(lineCount(r.output) == 1);

  r = runDtrain({"eval", tmp / "no-run"});
  CHECK(r.exit_code == 1);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("no checkpoint") != std::string::npos);

  // A dataset folder whose training images are garbage.
  std::string data = tmp / "data";
  fs::create_directories(data);
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                        "t10k-labels-idx1-ubyte"})
    writeFile(data + "/" + f, "this is not an IDX file");
  writeFile(tmp / "job.toml", "[model]\npreset = \"mlp\"\n[data]\ndataset = \"idx\"\ndir = \"" + data +
                                  "\"\n[job]\nrun_dir = \"" + (tmp / "run") + "\"\n");
  r = runDtrain({"train", tmp / "job.toml"});
  CHECK(r.exit_code == 1);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("train-labels-idx1-ubyte: not an IDX file") != std::string::npos);
}

TEST_CASE("train refuses a run directory that already holds a run") {
  TempDir tmp("cli3");
  std::string run = tmp / "run";
  writeFile(tmp / "job.toml", smallJob(run));
  RunResult first = runDtrain({"train", tmp / "job.toml", "--quiet", "--set", "train.epochs=1"});
  REQUIRE(first.exit_code == 0);
  auto before = stepDirs(run);
  RunResult again = runDtrain({"train", tmp / "job.toml", "--quiet"});
  CHECK(again.exit_code == 2);
  CHECK(again.output.find("dtrain resume " + run) != std::string::npos);
  CHECK(stepDirs(run) == before);
  RunResult over =
      runDtrain({"train", tmp / "job.toml", "--quiet", "--overwrite", "--set", "train.epochs=1"});
  CHECK(over.exit_code == 0);
}

TEST_CASE("check prints the resolved job and the model summary") {
  RunResult r = runDtrain({"check", std::string(DTRAIN_SOURCE_DIR) + "/configs/fashion_cnn.toml"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("[optimizer]") != std::string::npos);
  CHECK(r.output.find("conv2     conv2d") != std::string::npos);  // columns as wide as the longest name
  CHECK(r.output.find("relu2     relu      fused into conv2") != std::string::npos);
  // Total parameters of the cnn preset: 320 + 18,496 + 401,536 + 1,290.
  CHECK(r.output.find("421,642") != std::string::npos);
}

TEST_CASE("check shows the resnet and mobilenet_v2 presets with their parameter counts") {
  RunResult r = runDtrain({"check", std::string(DTRAIN_SOURCE_DIR) + "/configs/fashion_resnet20.toml"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  // ResNet-20 on one grey channel: 272,474 - 2 * 16 * 9 (the first convolution's 2 missing channels).
  CHECK(r.output.find("272,186") != std::string::npos);
  CHECK(r.output.find("of stage1_block1_b_bn, stem_relu") != std::string::npos);  // the residual add's inputs
  // The last block's add and relu are computed by its second batch_norm.
  CHECK(r.output.find("fused into stage3_block3_b_bn") != std::string::npos);
  CHECK(r.output.find("add fused, relu fused") != std::string::npos);
  RunResult m = runDtrain({"check", std::string(DTRAIN_SOURCE_DIR) + "/configs/fashion_resnet20.toml",
                           "--set", "model.preset=mobilenet_v2", "--set", "data.dataset=synthetic", "--set",
                           "data.shape=[3, 96, 96]", "--set", "data.classes=1000", "--set", "data.mean=[]",
                           "--set", "data.std=[]"});
  REQUIRE_MESSAGE(m.exit_code == 0, m.output);
  CHECK(m.output.find("3,504,872") != std::string::npos);  // torchvision's mobilenet_v2 at 1000 classes
  CHECK(m.output.find("block17_depthwise") != std::string::npos);
}
