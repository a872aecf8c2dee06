#include "cli/run_report.h"

#include <csignal>
#include <cstdio>

#include "cli/commands.h"

namespace dtrain::cli {

int reportOutcome(const TrainOutcome& outcome, const std::string& run_dir) {
  if (outcome.interrupted) {
    std::printf("interrupted by %s at step %lld; saved %s\ncontinue with: dtrain resume %s\n",
                outcome.stop_signal == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(outcome.step),
                outcome.checkpoint.c_str(), run_dir.c_str());
    return 128 + outcome.stop_signal;
  }
  if (outcome.already_finished) {
    std::printf("nothing to do: the run in %s already finished at step %lld (%s)\n", run_dir.c_str(),
                static_cast<long long>(outcome.step), outcome.checkpoint.c_str());
    return kExitOk;
  }
  if (outcome.test_accuracy >= 0)
    std::printf("done: step %lld, test loss %.4f, test accuracy %.4f\ncheckpoint: %s\n",
                static_cast<long long>(outcome.step), outcome.test_loss, outcome.test_accuracy,
                outcome.checkpoint.c_str());
  else
    std::printf("done: step %lld\ncheckpoint: %s\n", static_cast<long long>(outcome.step),
                outcome.checkpoint.c_str());
  return kExitOk;
}

}  // namespace dtrain::cli
