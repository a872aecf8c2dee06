// A pipeline schedule as data: for N stages and M micro-batches, one list of
// actions per stage (forward and backward of a micro-batch, the sends and
// receives between neighbouring stages, the all-reduce among a stage's
// replicas, the update), in the order the stage runs them. Compiled from
// [strategy] schedule:
//   gpipe  every micro-batch's forward, then every backward (GPipe): M
//          micro-batches' activations in flight per stage;
//   1f1b   PipeDream-Flush: stage s runs min(N - s - 1, M) forwards ahead,
//          then alternates one forward and one backward, then drains the
//          backwards: at most N - s in flight. Needs M >= N (fewer
//          micro-batches than stages leave a stage nothing to alternate
//          with; torchtitan#775 deadlocked there), refused otherwise.
// On every stage but the first, each backward that comes after the stage's
// last forward (the drain, where the stages before wait for it) is split as
// Zero Bubble splits it: the input gradients (BackwardInputs), sent back at
// once, then the weight gradients (BackwardWeights), which nobody waits for.
// Every replica of a stage runs the stage's list; schedule_check.h runs the
// lists against each other before any process starts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::pipeline {

enum class Op : uint8_t {
  Forward,
  Backward,
  BackwardInputs,   // a backward's input gradients alone (the layers that can leave the rest)
  BackwardWeights,  // the rest of that backward: the parameter gradients
  SendActivation,   // to stage + 1: the micro-batch's output
  RecvActivation,   // from stage - 1: the micro-batch's input
  SendGradient,     // to stage - 1: the gradient of the micro-batch's input
  RecvGradient,     // from stage + 1: the gradient of the micro-batch's output
  AllReduce,        // the stage's gradients summed over its replicas
  Update,           // the optimizer step of the stage's parameters
};

struct Action {
  Op op;
  int micro_batch = -1;  // -1 for AllReduce and Update
  int peer = -1;         // the stage a send goes to or a receive comes from

  bool operator==(const Action& o) const {
    return op == o.op && micro_batch == o.micro_batch && peer == o.peer;
  }
};

// "forward of micro-batch 3", "send the activation of micro-batch 3 to stage 2", ...
std::string describe(const Action& a);

struct ScheduleConfig {
  int stages = 2;
  int micro_batches = 1;
  std::string kind = "1f1b";  // "gpipe" | "1f1b"
  int replicas = 1;           // data-parallel copies of the pipeline
};

struct Schedule {
  ScheduleConfig config;
  std::vector<std::vector<Action>> stages;  // per stage, in order
};

// Throws ConfigError, one line naming the [strategy] key, for a
// configuration no schedule exists for.
Schedule compileSchedule(const ScheduleConfig& config);

}  // namespace dtrain::pipeline
