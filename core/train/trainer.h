// The training loop: batches from the loader, forward/backward on the compute
// replicas, gradients combined by the strategy, the optimizer step, then
// metrics, progress, evaluation and checkpoints at their cadence. Stops after
// the current step on SIGINT/SIGTERM, writing a checkpoint first.
//
// Not thread-safe; run() blocks until training ends or is interrupted.
#pragma once
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "core/config/job_config.h"
#include "core/train/strategy.h"
#include "core/train/train_state.h"

namespace dtrain {

struct ResumePoint;

struct TrainOutcome {
  bool interrupted = false;
  bool already_finished = false;  // resumed a run that had reached its last step
  int stop_signal = 0;
  int64_t step = 0;
  std::string checkpoint;  // the last checkpoint written ("" if none)
  double test_loss = 0, test_accuracy = -1;
  int64_t graph_replays = 0;  // GPU steps run by replaying a recorded CUDA graph
};

struct TrainerOptions {
  std::FILE* out = stdout;
  bool terminal = false;  // draw a progress bar in place
  bool quiet = false;     // no progress output at all (tests)
  // Fault injection for tests: the process SIGKILLs itself right after this
  // step's update (before any checkpoint of that step). 0 = never.
  int64_t fault_kill_at_step = 0;
  // Fault injection for tests: the loss gradient of this update is multiplied
  // by infinity, as an fp16 overflow leaves it (LossScaler::overflowAt). 0 = never.
  int64_t fault_overflow_at_step = 0;
  // How the workers train together (strategies/make_strategy.h): required.
  // Only the chief (rank 0) prints, writes metrics and checkpoints.
  std::shared_ptr<Strategy> strategy;
  // This process's index among its host's processes: a GPU run computes on
  // the GPU of that index.
  int local_index = 0;
  // dtrain bench step: times every step into this profile, and writes no
  // metrics, evaluations or checkpoints (nothing in the run directory).
  class StepProfile* profile = nullptr;
  // Told each step's number once the step is queued and the one before it
  // settled, before any evaluation or checkpoint (tests watch the steady state).
  std::function<void(int64_t step)> step_observer;

  // An elastic run ([cluster] elastic). `regroup` joins the group's next
  // generation once a collective failed (a peer was lost) or the ranks agreed
  // to take in replacements, and returns the strategy over it; the trainer
  // has dropped the old strategy first. It throws Error (not CommError) when
  // the run cannot go on. Empty: a failed collective ends the run.
  struct Regrouped {
    std::shared_ptr<Strategy> strategy;
    uint64_t generation = 0;
    std::string change;  // a line for the log: who was lost, who joined
    std::string stop;    // a policy limit the run stops at (with a checkpoint), or ""
  };
  std::function<Regrouped()> regroup;
  // Whether replacements wait to join; the chief asks at most once a second.
  std::function<bool()> replacements_waiting;
};

class Trainer {
 public:
  // `job` must be validated. The resolved job (threads made explicit) is what
  // checkpoints record.
  Trainer(JobConfig job, TrainerOptions options);
  ~Trainer();
  // From scratch when `resume` is null, else from that checkpoint (whose job
  // should be the one this trainer was made with). With several ranks only
  // the chief needs `resume`: it broadcasts the weights, optimizer state and
  // position to the others.
  TrainOutcome run(const ResumePoint* resume);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The number of compute threads a job uses (threads = 0: one per core).
int resolveThreads(int configured);

}  // namespace dtrain
