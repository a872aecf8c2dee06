// Runs a compiled schedule's action lists against each other, as the stages
// would, before any process starts: every micro-batch's forward and backward
// once per stage, the forward first (a split backward's weight gradients
// after its input gradients); each receive matched by the send its
// neighbour made, in the same order (messages between two stages travel in
// one FIFO queue each way, so a swapped pair is caught rather than silently
// mixed up: Megatron PR #5271); no deadlock; no send left unreceived. A
// schedule that fails any of these is refused with one line naming the
// stage and the action, never run into a hang.
//
// The same run, timed with a cost per forward and backward of each stage
// (sends and receives free), gives the schedule's bubble (the share of the
// stages' time spent waiting) and each stage's peak number of micro-batches
// whose activations are held (forwarded, not yet backwarded).
#pragma once
#include <utility>
#include <vector>

#include "strategies/pipeline/schedule.h"

namespace dtrain::pipeline {

struct ScheduleReport {
  double makespan = 0;              // in the costs' unit
  double bubble_fraction = 0;       // 1 - (the stages' busy time) / (stages x makespan)
  std::vector<int> peak_in_flight;  // per stage
  // Every action as the run took them, (stage, index in its list): an order
  // in which one process may run all the stages (LocalPipeline does).
  std::vector<std::pair<int, size_t>> order;
};

// `forward_cost` and `backward_cost`: per stage (empty: 1 and 2 on every
// stage, backward being about twice forward). Throws ConfigError.
ScheduleReport checkSchedule(const Schedule& schedule, const std::vector<double>& forward_cost = {},
                             const std::vector<double>& backward_cost = {});

}  // namespace dtrain::pipeline
