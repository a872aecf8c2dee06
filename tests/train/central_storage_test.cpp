// The central-storage strategy through the binary: workers compute gradients,
// rank 0 alone sums them, clips, runs the optimizer and sends the parameters
// back; the same training as mirrored's and one process's with the same
// global batch, the same checkpoint files, and a resume may switch between it
// and mirrored.
#include <doctest/doctest.h>

#include <string>

#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

std::string strategy(const std::string& type) { return "[strategy]\ntype = \"" + type + "\"\nworkers = 2\n"; }

void checkSameTraining(const TempDir& dir, const std::string& a, const std::string& b) {
  CAPTURE(a);
  CAPTURE(b);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(checkpointDifference(latestOf(dir, a), latestOf(dir, b), file) <= 1e-5);
  }
}

}  // namespace

TEST_CASE("central_storage: 2 workers train as mirrored and one process do, with and without clipping") {
  TempDir dir("cs_equal");
  for (const std::string clip : {"", "train.grad_clip_norm=0.05"}) {
    CAPTURE(clip);
    const std::vector<std::string> more =
        clip.empty() ? std::vector<std::string>{} : std::vector<std::string>{"--set", clip};
    const std::string suffix = clip.empty() ? "" : "_clip";
    // One process with two compute threads takes the same global batch in two slices.
    trainNamed(dir, "one" + suffix, smallJob(dir / ("one" + suffix)), 20, more);
    trainNamed(dir, "mirrored" + suffix,
               oneThread(smallJob(dir / ("mirrored" + suffix), strategy("mirrored"))), 20, more);
    trainNamed(dir, "central" + suffix,
               oneThread(smallJob(dir / ("central" + suffix), strategy("central_storage"))), 20, more);
    checkSameTraining(dir, "central" + suffix, "mirrored" + suffix);
    checkSameTraining(dir, "central" + suffix, "one" + suffix);
  }
  // Clipping made a difference (0.05 is below the gradients' norm early on).
  CHECK(checkpointDifference(latestOf(dir, "central_clip"), latestOf(dir, "central"), "model.safetensors") >
        1e-4);
}

TEST_CASE("central_storage: the start-up line says where the variables and the update are") {
  TempDir dir("cs_line");
  writeFile(dir / "job.toml", oneThread(smallJob(dir / "run", strategy("central_storage"))));
  const RunResult r = runDtrain({"train", dir / "job.toml", "--set", "train.steps=2"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("2 workers, variables and optimizer on rank 0") != std::string::npos);
}

TEST_CASE(
    "central_storage: a resume as mirrored, or of mirrored as central_storage, ends where the straight "
    "run does") {
  TempDir dir("cs_resume");
  trainNamed(dir, "straight", oneThread(smallJob(dir / "straight", strategy("central_storage"))), 20);
  struct Case {
    std::string name, from, then;
  };
  for (const Case& c : {Case{"as_mirrored", "central_storage", "strategy.type=mirrored"},
                        Case{"as_central", "mirrored", "strategy.type=central_storage"}}) {
    CAPTURE(c.name);
    // Killed after step 16; its last checkpoint is step 14's (one every 7 steps).
    writeFile(dir / (c.name + ".toml"), oneThread(smallJob(dir / c.name, strategy(c.from))));
    const RunResult killed = runDtrain(
        {"train", dir / (c.name + ".toml"), "-q", "--set", "train.steps=20", "--fault-kill-at-step", "16"});
    CHECK(killed.exit_code != 0);
    const RunResult resumed = runDtrain({"resume", dir / c.name, "-q", "--set", c.then});
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    checkSameTraining(dir, c.name, "straight");
  }
}

TEST_CASE("central_storage: a [cluster] of two hosts is refused in one line naming the key") {
  TempDir dir("cs_refused");
  writeFile(dir / "job.toml",
            smallJob(dir / "run", strategy("central_storage") +
                                      "[cluster]\ncoordinator = \"10.0.0.1:29500\"\ntoken = \"s\"\n"
                                      "[[cluster.hosts]]\naddress = \"10.0.0.1\"\n"
                                      "[[cluster.hosts]]\naddress = \"10.0.0.2\"\n"));
  const RunResult r = runDtrain({"train", dir / "job.toml"});
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("[strategy] type 'central_storage' runs on one host") != std::string::npos);
  CHECK(r.output.find("2 hosts") != std::string::npos);
}
