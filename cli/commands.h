// The subcommands. Each parses nothing itself (CLI11 does, in main.cpp),
// returns the process exit code, and lets dtrain::Error escape to main, which
// prints it as one line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/train/resume_point.h"

namespace dtrain::cli {

// Exit codes, documented in the README.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;    // a runtime error (data, checkpoint, I/O)
constexpr int kExitBadConfig = 2;  // the job file or command line is wrong
// Stopped by a signal after writing a checkpoint: 128 + the signal number,
// as a shell reports a process killed by it (130 for Ctrl-C, 143 for SIGTERM).

struct TrainArgs {
  std::string job_file;
  std::vector<std::string> overrides;
  bool quiet = false;
  bool overwrite = false;              // replace an existing run directory's checkpoints and metrics
  int64_t fault_kill_at_step = 0;      // tests only: SIGKILL itself after this step
  int64_t fault_overflow_at_step = 0;  // tests only: this step's loss gradient times infinity
  int node = -1;                       // multi-host: this host's index in [cluster] hosts (-1: find it)
};
int runTrain(const TrainArgs& args);

struct CheckArgs {
  std::string job_file;
  std::vector<std::string> overrides;
};
int runCheck(const CheckArgs& args);

struct EvalArgs {
  std::string checkpoint;  // a checkpoint dir, a `latest` link or a run dir
  bool json = false;
};
int runEval(const EvalArgs& args);

struct GenerateArgs {
  std::string checkpoint;  // a checkpoint dir, a `latest` link or a run dir
  std::string prompt;      // text for a byte-level model; ids "12 7 431" for a token model
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool no_cache = false;
};
int runGenerate(const GenerateArgs& args);

struct ResumeArgs {
  std::string run_dir;                 // a run directory (or one of its checkpoints)
  std::vector<std::string> overrides;  // --set: only keys that may change on resume (resume_overrides.h)
  std::string job_file;  // --job: [strategy], [cluster], ... from this file; the rest must match
  bool quiet = false;
  int64_t fault_kill_at_step = 0;
  int64_t fault_overflow_at_step = 0;
  int node = -1;
  std::string resolved_job;  // workers only: the job their host resolved, as TOML text
};
int runResume(const ResumeArgs& args);

// loadResumePoint, with each skipped corrupt checkpoint reported on stderr.
ResumePoint loadResumePointReporting(const std::string& path);

}  // namespace dtrain::cli
