// A run interrupted at any point and resumed ends with bitwise the same
// weights and optimizer state as an uninterrupted run of the same job.
#include <doctest/doctest.h>

#include "core/train/checkpoint.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// The final checkpoint's tensors, as bytes.
std::string finalTensors(const std::string& run_dir) {
  auto steps = stepDirs(run_dir);
  REQUIRE(!steps.empty());
  std::string dir = run_dir + "/checkpoints/" + steps.back();
  return steps.back() + "|" + readFile(dir + "/model.safetensors") + "|" +
         readFile(dir + "/optimizer.safetensors");
}

std::string referenceRun(const TempDir& tmp, const std::string& extra = "") {
  std::string run = tmp / "reference";
  writeFile(tmp / "reference.toml", smallJob(run, extra));
  RunResult r = runDtrain({"train", tmp / "reference.toml", "--quiet"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  return finalTensors(run);
}

}  // namespace

TEST_CASE("kill -9 at a step mid-epoch, then resume: bitwise equal to an uninterrupted run") {
  TempDir tmp("kill9");
  std::string expected = referenceRun(tmp);
  std::string run = tmp / "killed";
  writeFile(tmp / "killed.toml", smallJob(run));
  // The process sends itself SIGKILL right after step 17's update: a hard kill
  // after the checkpoint of step 14, in the middle of the first epoch.
  RunResult killed = runDtrain({"train", tmp / "killed.toml", "--quiet", "--fault-kill-at-step", "17"});
  CHECK(killed.exit_code == 128 + SIGKILL);
  CHECK(stepDirs(run).back() == "step-00000014");
  RunResult resumed = runDtrain({"resume", run, "--quiet"});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(finalTensors(run) == expected);

  // metrics.jsonl holds each step exactly once: the lines the killed run wrote
  // after its last checkpoint were dropped on resume.
  std::ifstream metrics(run + "/metrics.jsonl");
  std::string line;
  int64_t last_train_step = 0, train_lines = 0;
  while (std::getline(metrics, line)) {
    if (line.find("\"split\":\"train\"") == std::string::npos) continue;
    int64_t step = std::stoll(line.substr(8));
    CHECK(step == last_train_step + 1);
    last_train_step = step;
    ++train_lines;
  }
  CHECK(train_lines == last_train_step);
}

TEST_CASE("kill -9 from outside at an arbitrary moment, then resume: bitwise equal") {
  TempDir tmp("kill9ext");
  std::string expected = referenceRun(tmp);
  std::string run = tmp / "killed";
  writeFile(tmp / "killed.toml", smallJob(run));
  pid_t pid = startDtrain({"train", tmp / "killed.toml", "--quiet"}, tmp / "killed.log");
  // Kill as soon as the first checkpoint exists, wherever the run is then
  // (possibly in the middle of writing the next checkpoint).
  waitFor([&] { return !stepDirs(run).empty(); }, 60);
  ::kill(pid, SIGKILL);
  int code = waitExit(pid);
  CHECK((code == 128 + SIGKILL || code == 0));
  RunResult resumed = runDtrain({"resume", run, "--quiet"});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(finalTensors(run) == expected);
}

TEST_CASE("SIGTERM writes a checkpoint, exits 143, and resume finishes the same run") {
  TempDir tmp("sigterm");
  std::string expected = referenceRun(tmp);
  std::string run = tmp / "stopped";
  writeFile(tmp / "stopped.toml", smallJob(run));
  pid_t pid = startDtrain({"train", tmp / "stopped.toml"}, tmp / "stopped.log");
  waitFor([&] { return !stepDirs(run).empty(); }, 60);
  ::kill(pid, SIGTERM);
  int code = waitExit(pid);
  std::string log = readFile(tmp / "stopped.log");
  if (code == 0) {
    MESSAGE("the run finished before SIGTERM arrived; resume is then a no-op");
  } else {
    CHECK(code == 143);
    CHECK(log.find("interrupted by SIGTERM") != std::string::npos);
    CHECK(log.find("dtrain resume " + run) != std::string::npos);
  }
  RunResult resumed = runDtrain({"resume", run, "--quiet"});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(finalTensors(run) == expected);
}

TEST_CASE("resume falls back to the previous checkpoint when the newest is corrupt") {
  TempDir tmp("corrupt");
  std::string expected = referenceRun(tmp);
  std::string run = tmp / "corrupted";
  writeFile(tmp / "corrupted.toml", smallJob(run));
  RunResult killed = runDtrain({"train", tmp / "corrupted.toml", "--quiet", "--fault-kill-at-step", "30"});
  CHECK(killed.exit_code == 128 + SIGKILL);
  auto steps = stepDirs(run);
  REQUIRE(steps.back() == "step-00000028");
  // Flip a byte in the newest checkpoint's weights.
  std::string weights = run + "/checkpoints/step-00000028/model.safetensors";
  std::string bytes = readFile(weights);
  bytes[bytes.size() - 3] ^= 0x40;
  writeFile(weights, bytes);
  RunResult resumed = runDtrain({"resume", run, "--quiet"});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(resumed.output.find("step-00000028 is corrupt") != std::string::npos);
  CHECK(resumed.output.find("using step-00000021") != std::string::npos);
  CHECK(finalTensors(run) == expected);
}

TEST_CASE("resume of a finished run changes nothing") {
  TempDir tmp("finished");
  std::string expected = referenceRun(tmp);
  RunResult again = runDtrain({"resume", tmp / "reference", "--quiet"});
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("already finished") != std::string::npos);
  CHECK(finalTensors(tmp / "reference") == expected);
}
