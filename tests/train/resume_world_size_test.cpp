// Resume on another set of workers: the global batches and the position are
// world-independent, so a run stopped on 2 workers and continued on 3 (or on
// one process, or on two hosts of which only node 0 holds the run directory)
// ends where the uninterrupted run ends, up to float rounding of the sums.
#include <doctest/doctest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <cstdio>

#include "core/train/resume_point.h"
#include "core/train/safetensors.h"
#include "tests/common/free_port.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

namespace {

// The largest difference between the final weights of two runs, relative to
// the largest weight.
double weightDifference(const std::string& run_a, const std::string& run_b) {
  return checkpointDifference(run_a + "/checkpoints/latest", run_b + "/checkpoints/latest",
                              "model.safetensors");
}

// The train steps metrics.jsonl holds, in order; each once when the resume
// continued at the checkpoint's step.
std::vector<int64_t> trainSteps(const std::string& run_dir) {
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  std::vector<int64_t> steps;
  std::string line;
  while (std::getline(metrics, line))
    if (line.find("\"split\":\"train\"") != std::string::npos) steps.push_back(std::stoll(line.substr(8)));
  return steps;
}

void checkStepsContinue(const std::string& run_dir, int64_t last_step) {
  std::vector<int64_t> steps = trainSteps(run_dir);
  REQUIRE(static_cast<int64_t>(steps.size()) == last_step);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<int64_t>(i) + 1);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The small job for 2 epochs (42 steps).
std::string twoEpochs(const std::string& run_dir, const std::string& extra = "") {
  return replaced(smallJob(run_dir, extra), "epochs = 6", "epochs = 2");
}

// ... with one compute thread per process.
std::string job(const std::string& run_dir, const std::string& strategy) {
  return replaced(twoEpochs(run_dir, strategy), "threads = 2", "threads = 1");
}

const char* const kTwoWorkers = "[strategy]\ntype = \"mirrored\"\nworkers = 2\n";

// Copies a run directory (its `latest` link as a link).
void copyRun(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
}

// A non-loopback IPv4 address of this machine (host byte order), or 0 when it has none.
uint32_t nonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  uint32_t found = 0;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if ((a >> 24) != 127) found = a;
  }
  ::freeifaddrs(list);
  return found;
}

std::string dotted(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

// Starts build/dtrain in `cwd` (a host of its own, as far as relative paths go).
pid_t startDtrainIn(const std::string& cwd, const std::vector<std::string>& args, const std::string& log) {
  return startDtrain(args, log, [&cwd] {
    if (::chdir(cwd.c_str()) != 0) std::_Exit(126);
  });
}

// Waits for `pid` at most `seconds`; SIGKILLs it after that (and fails).
int waitExitWithin(pid_t pid, double seconds) {
  int status = 0;
  bool done = waitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, seconds);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL_CHECK("dtrain (pid " << pid << ") did not end within " << seconds << " s");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("resume at a different world size reaches the same accuracy as the uninterrupted run") {
  TempDir tmp("resume_world");
  // Uninterrupted: 2 workers x 1 thread.
  writeFile(tmp / "reference.toml", job(tmp / "reference", kTwoWorkers));
  RunResult reference = runDtrain({"train", tmp / "reference.toml", "-q"});
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.output);
  const EvalFigures expected = evalFigures(tmp / "reference");
  REQUIRE(stepDirs(tmp / "reference").back() == "step-00000042");

  // The same job killed after step 17 (its last checkpoint is step 14).
  writeFile(tmp / "killed.toml", job(tmp / "killed", kTwoWorkers));
  RunResult killed = runDtrain({"train", tmp / "killed.toml", "-q", "--fault-kill-at-step", "17"});
  CHECK(killed.exit_code != 0);
  REQUIRE(stepDirs(tmp / "killed").back() == "step-00000014");

  struct Resume {
    const char* name;
    std::vector<std::string> sets;
    const char* note;
  };
  const std::vector<Resume> resumes = {
      {"three",
       {"strategy.workers=3"},
       "resuming on 3 processes x 1 thread (the checkpoint was written on 2"},
      {"one", {"strategy.type=one_device", "job.threads=1"}, "resuming on 1 process x 1 thread"},
  };
  for (const Resume& r : resumes) {
    CAPTURE(r.name);
    const std::string run = tmp / r.name;
    copyRun(tmp / "killed", run);
    std::vector<std::string> args = {"resume", run};
    for (const std::string& s : r.sets) args.insert(args.end(), {"--set", s});
    RunResult resumed = runDtrain(args);
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed.output.find(r.note) != std::string::npos);
    CHECK(resumed.output.find("resuming small at step 14") != std::string::npos);
    // It continued at the checkpoint's step and position and ended at the same step.
    CHECK(stepDirs(run).back() == "step-00000042");
    checkStepsContinue(run, 42);
    const EvalFigures got = evalFigures(run);
    CHECK(std::fabs(got.loss - expected.loss) <= 1e-3 * std::fabs(expected.loss));
    CHECK(std::fabs(got.accuracy - expected.accuracy) <= 0.005);
    CHECK(weightDifference(run, tmp / "reference") < 1e-3);
  }
}

TEST_CASE("resume from one process onto 2 workers: bit for bit when the thread count per sum is kept") {
  // 2 workers x 1 thread compute exactly what 1 process x 2 threads computes
  // (mirrored_test), so here the resumed run must equal the uninterrupted one exactly.
  TempDir tmp("resume_onto_workers");
  writeFile(tmp / "reference.toml", twoEpochs(tmp / "reference"));
  REQUIRE(runDtrain({"train", tmp / "reference.toml", "-q"}).exit_code == 0);
  writeFile(tmp / "killed.toml", twoEpochs(tmp / "killed"));
  CHECK(runDtrain({"train", tmp / "killed.toml", "-q", "--fault-kill-at-step", "17"}).exit_code == 137);
  RunResult resumed = runDtrain({"resume", tmp / "killed", "-q", "--set", "strategy.type=mirrored", "--set",
                                 "strategy.workers=2", "--set", "job.threads=1"});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  checkStepsContinue(tmp / "killed", 42);
  CHECK(readFile(tmp / "killed/checkpoints/latest/model.safetensors") ==
        readFile(tmp / "reference/checkpoints/latest/model.safetensors"));
}

TEST_CASE("resume refuses to change what the checkpoint was trained with, and asks for a hidden token") {
  TempDir tmp("resume_refusals");
  writeFile(tmp / "job.toml", job(tmp / "run", ""));
  REQUIRE(runDtrain({"train", tmp / "job.toml", "-q", "--set", "train.steps=7"}).exit_code == 0);

  RunResult preset = runDtrain({"resume", tmp / "run", "--set", "model.preset=cnn"});
  CHECK(preset.exit_code == 2);
  CHECK(preset.output.rfind("dtrain: error: --set model.preset=cnn: [model] preset cannot change on resume: ",
                            0) == 0);
  CHECK(std::count(preset.output.begin(), preset.output.end(), '\n') == 1);

  // --job FILE whose other sections differ: the first differing key is named.
  writeFile(tmp / "other.toml", replaced(job(tmp / "run", ""), "lr = 0.003", "lr = 0.01"));
  RunResult other = runDtrain({"resume", tmp / "run", "--job", tmp / "other.toml"});
  CHECK(other.exit_code == 2);
  CHECK(other.output.rfind("dtrain: error: " + std::string(tmp / "other.toml") + ":", 0) == 0);
  CHECK(other.output.find("[optimizer] lr is 0.01 here, but the checkpoint was trained with 0.003; ") !=
        std::string::npos);

  // A multi-host job whose token was inline: the checkpoint shows "<hidden>".
  const std::string cluster =
      "[strategy]\ntype = \"multi_worker_mirrored\"\n[cluster]\ncoordinator = "
      "\"127.0.0.1:" +
      std::to_string(freePort()) +
      "\"\ntoken = \"s3cret\"\njoin_timeout_s = 60\n"
      "hosts = [{ address = \"127.0.0.1\", slots = 2 }]\n";
  writeFile(tmp / "cluster.toml", job(tmp / "multi", cluster));
  RunResult trained = runDtrain({"train", tmp / "cluster.toml", "-q", "--set", "train.steps=7"});
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.output);
  RunResult hidden = runDtrain({"resume", tmp / "multi", "--set", "train.steps=14"});
  CHECK(hidden.exit_code == 2);
  CHECK(hidden.output ==
        "dtrain: error: [cluster] token was given inline, and checkpoints do not store it (state.toml shows "
        "\"<hidden>\"); give it again: `dtrain resume " +
            std::string(tmp / "multi") +
            " --job FILE` with the job file that holds it, --set cluster.token=..., or --set "
            "cluster.token_file=PATH\n");
  RunResult with_token =
      runDtrain({"resume", tmp / "multi", "-q", "--set", "train.steps=14", "--set", "cluster.token=s3cret"});
  INFO(with_token.output);
  CHECK(with_token.exit_code == 0);
  CHECK(stepDirs(tmp / "multi").back() == "step-00000014");
}

TEST_CASE("resume onto two hosts: node 1 has no run directory and takes the job from --job FILE") {
  // Each "host" is a working directory of its own: node 0's holds the run
  // (relative run_dir "run"), node 1's does not. The hosts of a [cluster]
  // need distinct, non-loopback addresses: this machine's address, written
  // as usual for node 0 and as one 32-bit number for node 1 (getaddrinfo
  // reads both as the same address).
  const uint32_t address = nonLoopbackAddress();
  if (address == 0) {
    MESSAGE("skipped: this machine has no non-loopback IPv4 address for a two-host [cluster]");
    return;
  }
  TempDir tmp("resume_hosts");
  const std::string node0 = tmp / "node0", node1 = tmp / "node1";
  fs::create_directories(node0);
  fs::create_directories(node1);
  writeFile(tmp / "reference.toml", job(tmp / "reference", kTwoWorkers));
  REQUIRE(runDtrain({"train", tmp / "reference.toml", "-q"}).exit_code == 0);
  const EvalFigures expected = evalFigures(tmp / "reference");

  writeFile(node0 + "/job.toml", job("run", kTwoWorkers));
  pid_t first =
      startDtrainIn(node0, {"train", "job.toml", "-q", "--fault-kill-at-step", "17"}, tmp / "train.log");
  CHECK(waitExitWithin(first, 120) != 0);
  REQUIRE(stepDirs(node0 + "/run").back() == "step-00000014");

  // The same job on 3 workers over two hosts; the same file on both.
  const std::string hosts = "[strategy]\ntype = \"multi_worker_mirrored\"\n[cluster]\ncoordinator = \"" +
                            dotted(address) + ":" + std::to_string(freePort()) +
                            "\"\ntoken = \"s3cret\"\njoin_timeout_s = 60\nheartbeat_timeout_s = 30\n" +
                            "hosts = [{ address = \"" + dotted(address) + "\", slots = 2 }, { address = \"" +
                            std::to_string(address) + "\", slots = 1 }]\n";
  writeFile(node0 + "/hosts.toml", job("run", hosts));
  writeFile(node1 + "/hosts.toml", job("run", hosts));
  pid_t host0 =
      startDtrainIn(node0, {"resume", "run", "--job", "hosts.toml", "--node", "0", "-q"}, tmp / "node0.log");
  pid_t host1 =
      startDtrainIn(node1, {"resume", "run", "--job", "hosts.toml", "--node", "1", "-q"}, tmp / "node1.log");
  int code0 = waitExitWithin(host0, 300), code1 = waitExitWithin(host1, 60);
  INFO("node 0: " << readFile(tmp / "node0.log"));
  INFO("node 1: " << readFile(tmp / "node1.log"));
  CHECK(code0 == 0);
  CHECK(code1 == 0);
  CHECK(stepDirs(node0 + "/run").back() == "step-00000042");
  checkStepsContinue(node0 + "/run", 42);
  // Node 1 read no checkpoint and wrote none, nor metrics.
  CHECK(stepDirs(node1 + "/run").empty());
  CHECK_FALSE(fs::exists(node1 + "/run/metrics.jsonl"));
  const EvalFigures got = evalFigures(node0 + "/run");
  CHECK(std::fabs(got.loss - expected.loss) <= 1e-3 * std::fabs(expected.loss));
  CHECK(std::fabs(got.accuracy - expected.accuracy) <= 0.005);

  // Without --job, a host that holds no checkpoint says what to give it.
  RunResult bare = runDtrain({"resume", node1 + "/run", "--node", "1"});
  CHECK(bare.exit_code == 1);
  CHECK(bare.output.find("a host other than node 0 needs no checkpoint: give it the job with --job FILE") !=
        std::string::npos);
}

TEST_CASE("a host without the checkpoint names the run directory as node 0 does") {
  TempDir tmp("resume_run_dir");
  writeFile(tmp / "job.toml", job(tmp / "run", ""));
  REQUIRE(runDtrain({"train", tmp / "job.toml", "-q", "--set", "train.steps=7"}).exit_code == 0);
  const std::string run = tmp / "run";
  for (const std::string& path : {run, run + "/", run + "/checkpoints", run + "/checkpoints/latest",
                                  run + "/checkpoints/step-00000007"}) {
    CAPTURE(path);
    std::vector<std::string> warnings;
    CHECK(dtrain::runDirOfPath(path) == run);
    CHECK(dtrain::loadResumePoint(path, &warnings).job.job.run_dir == run);
  }
  CHECK(dtrain::runDirOfPath("run") == "run");
  CHECK(dtrain::runDirOfPath("./run//") == "./run");
  CHECK(dtrain::runDirOfPath("/") == "/");
}
