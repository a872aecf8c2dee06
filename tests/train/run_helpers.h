// Helpers for tests that drive the dtrain binary: temporary run directories,
// job files, running the binary in the foreground or background, and reading
// what a run wrote.
#pragma once
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/train/safetensors.h"
#include "tests/common/temp_dir.h"

namespace dtrain::testing {

namespace fs = std::filesystem;

inline void writeFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lines in `s` (its newline characters): an error report is exactly one.
inline int lineCount(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs build/dtrain with `args` to completion; output captured. `env`, when
// given, is put before the command ("NAME='value'") to set its environment.
inline RunResult runDtrain(const std::vector<std::string>& args, const std::string& env = "") {
  std::string cmd = env.empty() ? DTRAIN_BINARY : env + " " + DTRAIN_BINARY;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Starts build/dtrain in the background with output (stdout and stderr) to
// `log`; returns its pid. `in_child`, when given, runs in the child just
// before the exec: to change its working directory or environment (it may end
// the child with std::_Exit when it cannot).
inline pid_t startDtrain(const std::vector<std::string>& args, const std::string& log,
                         const std::function<void()>& in_child = {}) {
  std::fflush(nullptr);  // the child must not repeat buffered output
  pid_t pid = ::fork();
  if (pid == 0) {
    if (in_child) in_child();
    if (!std::freopen(log.c_str(), "w", stdout)) std::_Exit(126);
    ::dup2(::fileno(stdout), 2);
    std::vector<char*> argv;
    std::string bin = DTRAIN_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    std::_Exit(127);
  }
  return pid;
}

// The test figures `dtrain eval RUN_DIR --json` reports for a run's newest checkpoint.
// samples: what the figures are over (a language model's counted tokens).
struct EvalFigures {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

inline EvalFigures evalFigures(const std::string& run_dir) {
  RunResult r = runDtrain({"eval", run_dir, "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  size_t loss = r.output.find("\"loss\":"), accuracy = r.output.find("\"accuracy\":");
  REQUIRE(loss != std::string::npos);
  REQUIRE(accuracy != std::string::npos);
  size_t samples = r.output.find("\"samples\":"), tokens = r.output.find("\"tokens\":");
  const int64_t count = samples != std::string::npos  ? std::atoll(r.output.c_str() + samples + 10)
                        : tokens != std::string::npos ? std::atoll(r.output.c_str() + tokens + 9)
                                                      : 0;
  return {std::atof(r.output.c_str() + loss + 7), std::atof(r.output.c_str() + accuracy + 11), count};
}

// The last evaluation a run logged in its metrics.jsonl (loss, accuracy, and
// samples as the accuracy's denominator); samples 0 when it logged none.
struct LoggedEval {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

inline LoggedEval lastLoggedEval(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  LoggedEval out;
  auto number = [](const std::string& line, const std::string& key) {
    const size_t at = line.find("\"" + key + "\":");
    return at == std::string::npos ? 0.0 : std::atof(line.c_str() + at + key.size() + 3);
  };
  for (std::string line; std::getline(in, line);)
    if (line.find("\"split\":\"test\"") != std::string::npos)
      out = {number(line, "loss"), number(line, "accuracy"), static_cast<int64_t>(number(line, "samples"))};
  return out;
}

// Waits for `pid`; returns its exit code (128 + signal when killed).
inline int waitExit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Polls until `pred` holds or `seconds` pass.
template <typename Pred>
bool waitFor(Pred pred, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// Step directories under RUN_DIR/checkpoints, sorted.
inline std::vector<std::string> stepDirs(const std::string& run_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(fs::path(run_dir) / "checkpoints", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The processes a running host dtrain started (its workers), in start order.
inline std::vector<pid_t> workersOf(pid_t host) {
  std::istringstream children(
      readFile("/proc/" + std::to_string(host) + "/task/" + std::to_string(host) + "/children"));
  std::vector<pid_t> pids;
  for (pid_t pid; children >> pid;) pids.push_back(pid);
  return pids;
}

// `job` (smallJob's, say) with one compute thread per worker, so that
// several worker processes fit the cores.
inline std::string oneThread(std::string job) {
  job.replace(job.find("threads = 2"), 11, "threads = 1");
  return job;
}

// A small job on synthetic data: fast, deterministic, with dropout so the
// counter-based masks are exercised by the resume tests.
inline std::string smallJob(const std::string& run_dir, const std::string& extra = "") {
  return "[job]\nname = \"small\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 7\nthreads = 2\n"
         "[model]\npreset = \"mlp\"\nhidden = [64, 32]\ndropout = 0.1\n"
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 1000\ntest_samples = 200\nshape = [1, 12, 12]\n"
         "classes = 4\n"
         "[train]\nepochs = 6\nbatch_size = 48\ncheckpoint_every_steps = 7\nkeep_last = 50\n"
         "[optimizer]\ntype = \"adamw\"\nlr = 0.003\nweight_decay = 0.01\n"
         "[schedule]\ntype = \"cosine\"\nwarmup_steps = 10\n" +
         extra;
}

// Writes `job` to DIR/NAME.toml and trains it for `steps` steps (quietly,
// with the `more` arguments); the run must succeed.
inline void trainNamed(const TempDir& dir, const std::string& name, const std::string& job, int steps,
                       const std::vector<std::string>& more = {}) {
  writeFile(dir / (name + ".toml"), job);
  std::vector<std::string> args = {"train", dir / (name + ".toml"), "-q", "--set",
                                   "train.steps=" + std::to_string(steps)};
  args.insert(args.end(), more.begin(), more.end());
  const RunResult r = runDtrain(args);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// The latest checkpoint of the run DIR/NAME (whose job trainNamed wrote).
inline std::string latestOf(const TempDir& dir, const std::string& name) {
  return dir / (name + "/checkpoints/latest");
}

// Runs `train_args` (a `dtrain train` command line) killed by SIGKILL at step
// `kill_at`, checks that the last checkpoint it left is `left` ("step-00000030"),
// resumes `run_dir` to the end, and checks that its latest checkpoint holds the
// bits of `reference_run`'s: the model and the optimizer state.
inline void checkKilledRunResumesExactly(std::vector<std::string> train_args, int64_t kill_at,
                                         const std::string& run_dir, const std::string& left,
                                         const std::string& reference_run) {
  train_args.insert(train_args.end(), {"--fault-kill-at-step", std::to_string(kill_at)});
  CHECK(runDtrain(train_args).exit_code == 128 + SIGKILL);
  CHECK(stepDirs(run_dir).back() == left);
  RunResult resumed = runDtrain({"resume", run_dir, "-q"});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    CHECK(readFile(run_dir + "/checkpoints/latest/" + file) ==
          readFile(reference_run + "/checkpoints/latest/" + file));
}

// The largest difference between the tensors of `file` in two checkpoint
// directories, relative to the largest value.
inline double checkpointDifference(const std::string& a_dir, const std::string& b_dir,
                                   const std::string& file) {
  const SafetensorsFile a = readSafetensors(a_dir + "/" + file);
  const SafetensorsFile b = readSafetensors(b_dir + "/" + file);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double diff = 0, scale = 1e-12;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    REQUIRE(a.tensors[t].name == b.tensors[t].name);
    REQUIRE(a.tensors[t].data.size() == b.tensors[t].data.size());
    for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(a.tensors[t].data[i] - b.tensors[t].data[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(a.tensors[t].data[i])));
    }
  }
  return diff / scale;
}

}  // namespace dtrain::testing
