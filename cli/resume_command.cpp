#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/run_report.h"
#include "core/train/checkpoint.h"
#include "core/train/progress.h"
#include "core/train/train_state.h"
#include "core/train/trainer.h"

namespace dtrain::cli {

int runResume(const ResumeArgs& args) {
  std::vector<std::string> warnings;
  LoadedCheckpoint ckpt = loadLatestCheckpoint(args.run_dir, &warnings);
  for (const auto& w : warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  TrainState state;
  JobConfig job;
  trainStateFromToml(ckpt.state_toml, ckpt.dir + "/state.toml", &state, &job);
  // The run continues where its checkpoints are, whatever directory the
  // original command was started from.
  job.job.run_dir = std::filesystem::path(ckpt.dir).parent_path().parent_path().string();
  TrainerOptions options;
  options.terminal = ProgressDisplay::isTerminal(stdout);
  options.quiet = args.quiet;
  options.fault_kill_at_step = args.fault_kill_at_step;
  Trainer trainer(job, options);
  return reportOutcome(trainer.run(&ckpt), job.job.run_dir);
}

}  // namespace dtrain::cli
