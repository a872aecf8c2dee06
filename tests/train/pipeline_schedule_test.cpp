// Pipeline schedules as data: the GPipe and 1F1B lists every stage runs,
// checked by running them against each other (every action once, forward
// before backward, each receive matched by its send in order, no deadlock),
// their bubble and peak activations in flight against the formulas, and
// hand-made broken schedules refused with the stage and action named.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/schedule_check.h"

using namespace dtrain;
using namespace dtrain::pipeline;

namespace {

std::string refusal(const Schedule& s) {
  try {
    checkSchedule(s);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Two stages, one micro-batch each way, as the compiler would write them.
Schedule twoStages(std::vector<Action> first, std::vector<Action> second, int micro_batches = 1) {
  Schedule s;
  s.config = ScheduleConfig{2, micro_batches, "gpipe", 1};
  s.stages = {std::move(first), std::move(second)};
  return s;
}

}  // namespace

TEST_CASE(
    "pipeline schedule: gpipe and 1f1b run on every shape, with the bubble and activations of the formulas") {
  for (const std::string kind : {"gpipe", "1f1b"})
    for (int n : {2, 3, 4})
      for (int m : {1, n - 1, n, 2 * n, 8})
        for (int r : {1, 2}) {
          if (kind == "1f1b" && m < n) continue;
          CAPTURE(kind);
          CAPTURE(n);
          CAPTURE(m);
          CAPTURE(r);
          const Schedule s = compileSchedule(ScheduleConfig{n, m, kind, r});
          const ScheduleReport report = checkSchedule(s);
          // Equal stages, backward twice forward: (N - 1) / (M + N - 1) for both
          // unsplit; the drain's split backwards (each stage after the first
          // sends its input gradients half a backward sooner) take at least
          // half a backward off the makespan.
          CHECK(report.bubble_fraction < double(n - 1) / (m + n - 1));
          CHECK(report.makespan <= 3.0 * (m + n - 1) - 1.0);
          CHECK(report.makespan >= 3.0 * m);  // no stage computes for less than its own work
          REQUIRE(report.peak_in_flight.size() == static_cast<size_t>(n));
          for (int stage = 0; stage < n; ++stage) {
            CAPTURE(stage);
            const int expected = kind == "gpipe" ? m : std::min(n - stage, m);
            CHECK(report.peak_in_flight[static_cast<size_t>(stage)] == expected);
            const std::vector<Action>& list = s.stages[static_cast<size_t>(stage)];
            CHECK(list.back() == Action{Op::Update, -1, -1});
            const bool all_reduces =
                std::find(list.begin(), list.end(), Action{Op::AllReduce, -1, -1}) != list.end();
            CHECK(all_reduces == (r > 1));
          }
        }
}

TEST_CASE("pipeline schedule: 1f1b holds at most N - s micro-batches where gpipe holds M") {
  const ScheduleReport gpipe = checkSchedule(compileSchedule(ScheduleConfig{4, 8, "gpipe", 1}));
  const ScheduleReport one_f_one_b = checkSchedule(compileSchedule(ScheduleConfig{4, 8, "1f1b", 1}));
  CHECK(gpipe.peak_in_flight == std::vector<int>{8, 8, 8, 8});
  CHECK(one_f_one_b.peak_in_flight == std::vector<int>{4, 3, 2, 1});
}

TEST_CASE("pipeline schedule: the stage lists are the textbook ones") {
  const Schedule s = compileSchedule(ScheduleConfig{2, 2, "1f1b", 1});
  // Stage 0 runs one forward ahead, then alternates; stage 1 alternates from the start.
  CHECK(s.stages[0] == std::vector<Action>{{Op::Forward, 0, -1},
                                           {Op::SendActivation, 0, 1},
                                           {Op::Forward, 1, -1},
                                           {Op::SendActivation, 1, 1},
                                           {Op::RecvGradient, 0, 1},
                                           {Op::Backward, 0, -1},
                                           {Op::RecvGradient, 1, 1},
                                           {Op::Backward, 1, -1},
                                           {Op::Update, -1, -1}});
  // Its last backward, after its last forward, sends the input gradients
  // before it computes the weight gradients, which nobody waits for.
  CHECK(s.stages[1] == std::vector<Action>{{Op::RecvActivation, 0, 0},
                                           {Op::Forward, 0, -1},
                                           {Op::Backward, 0, -1},
                                           {Op::SendGradient, 0, 0},
                                           {Op::RecvActivation, 1, 0},
                                           {Op::Forward, 1, -1},
                                           {Op::BackwardInputs, 1, -1},
                                           {Op::SendGradient, 1, 0},
                                           {Op::BackwardWeights, 1, -1},
                                           {Op::Update, -1, -1}});
}

TEST_CASE("pipeline schedule: a split drain backward saves its weight gradients' time, as timed by hand") {
  // 2 stages, forward 1, backward 2 (1 + 1 when split), 4 micro-batches.
  // Unsplit: stage 1's last backward ends at 13, stage 0's at 15. Split:
  // stage 1 sends the last input gradient at 12, stage 0 ends at 14, while
  // stage 1 computes the weight gradients from 12 to 13.
  const ScheduleReport r = checkSchedule(compileSchedule(ScheduleConfig{2, 4, "1f1b", 1}));
  CHECK(r.makespan == doctest::Approx(14.0));
  CHECK(r.bubble_fraction == doctest::Approx(1.0 - 24.0 / 28.0));
  // gpipe splits every backward of stage 1 (all come after its last forward).
  const Schedule gpipe = compileSchedule(ScheduleConfig{2, 4, "gpipe", 1});
  for (int m = 0; m < 4; ++m) {
    CHECK(std::count(gpipe.stages[1].begin(), gpipe.stages[1].end(), Action{Op::BackwardInputs, m, -1}) == 1);
    CHECK(std::count(gpipe.stages[0].begin(), gpipe.stages[0].end(), Action{Op::Backward, m, -1}) == 1);
  }
}

TEST_CASE("pipeline schedule: unequal stages wait for the slowest, as timed by hand") {
  // Stage 1 twice as slow: its forwards end at 3, 5, 7, 9; its backwards
  // (split, 2 + 2) send their input gradients at 11, 15, 19, 23 and end at
  // 13, 17, 21, 25; stage 0's backwards start when each gradient arrives and
  // end at 13, 17, 21, 25.
  const ScheduleReport r = checkSchedule(compileSchedule(ScheduleConfig{2, 4, "gpipe", 1}), {1, 2}, {2, 4});
  CHECK(r.makespan == doctest::Approx(25.0));
  CHECK(r.bubble_fraction == doctest::Approx(1.0 - 36.0 / 50.0));
}

TEST_CASE("pipeline schedule: configurations without a schedule are refused in one line") {
  auto why = [](const ScheduleConfig& c) {
    try {
      compileSchedule(c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(
      why(ScheduleConfig{4, 3, "1f1b", 1}) ==
      "strategy.schedule = \"1f1b\" with 3 micro-batches over 4 stages: 1f1b needs micro_batches >= stages; "
      "raise micro_batches or use schedule = \"gpipe\"");
  CHECK(why(ScheduleConfig{2, 4, "interleaved", 1}) ==
        "strategy.schedule = \"interleaved\": expected \"gpipe\" or \"1f1b\"");
  CHECK(why(ScheduleConfig{0, 4, "gpipe", 1}) == "strategy.stages = 0: need at least 1");
  CHECK(why(ScheduleConfig{2, 0, "gpipe", 1}) == "strategy.micro_batches = 0: need at least 1");
  CHECK(why(ScheduleConfig{2, 2, "gpipe", 0}) == "strategy.replicas = 0: need at least 1");
}

TEST_CASE("pipeline schedule: broken lists are refused naming the stage and the action") {
  const Action f0{Op::Forward, 0, -1}, b0{Op::Backward, 0, -1}, f1{Op::Forward, 1, -1},
      b1{Op::Backward, 1, -1};
  const Action update{Op::Update, -1, -1};
  const std::string prefix = "pipeline schedule (gpipe, 2 stages, ";
  // Messages to the same peer swapped: stage 0 sends micro-batch 1's activation first.
  CHECK(refusal(twoStages({f0,
                           f1,
                           {Op::SendActivation, 1, 1},
                           {Op::SendActivation, 0, 1},
                           {Op::RecvGradient, 0, 1},
                           b0,
                           {Op::RecvGradient, 1, 1},
                           b1,
                           update},
                          {{Op::RecvActivation, 0, 0},
                           f0,
                           {Op::RecvActivation, 1, 0},
                           f1,
                           b0,
                           {Op::SendGradient, 0, 0},
                           b1,
                           {Op::SendGradient, 1, 0},
                           update},
                          2)) ==
        prefix +
            "2 micro-batches): stage 1 expects the activation of micro-batch 0 from stage 0, which sends the "
            "activation of micro-batch 1 first");
  // Each stage waits for the other.
  CHECK(
      refusal(twoStages({f0, {Op::RecvGradient, 0, 1}, {Op::SendActivation, 0, 1}, b0, update},
                        {{Op::RecvActivation, 0, 0}, f0, b0, {Op::SendGradient, 0, 0}, update})) ==
      prefix +
          "1 micro-batches): deadlock: stage 0 waits to receive the gradient of micro-batch 0 from stage 1, "
          "stage 1 waits to receive the activation of micro-batch 0 from stage 0");
  // A send nobody receives.
  CHECK(refusal(twoStages({f0, {Op::SendActivation, 0, 1}, b0, update}, {f0, b0, update})) ==
        prefix +
            "1 micro-batches): stage 0 sends the activation of micro-batch 0 to stage 1, which never "
            "receives it");
  // Backward first, a backward missing, a send to a stage that is not the next.
  CHECK(refusal(twoStages({b0, f0, update}, {f0, b0, update})) ==
        prefix + "1 micro-batches): stage 0 runs the backward of micro-batch 0 before its forward");
  CHECK(refusal(twoStages({f0, update}, {f0, b0, update})) ==
        prefix + "1 micro-batches): stage 0 never runs the backward of micro-batch 0");
  CHECK(refusal(twoStages({f0, {Op::SendGradient, 0, 1}, b0, update}, {f0, b0, update})) ==
        prefix +
            "1 micro-batches): stage 0: send the gradient of micro-batch 0 to stage 1; it may only send to "
            "stage -1");
  // A split backward's weight gradients without its input gradients first, or never.
  const Action inputs0{Op::BackwardInputs, 0, -1}, weights0{Op::BackwardWeights, 0, -1};
  CHECK(refusal(twoStages({f0, b0, update}, {f0, weights0, inputs0, update})) ==
        prefix +
            "1 micro-batches): stage 1 runs the weight gradients of micro-batch 0 without its backward for "
            "the input gradients before it, or twice");
  CHECK(refusal(twoStages({f0, b0, update}, {f0, inputs0, update})) ==
        prefix + "1 micro-batches): stage 1 never runs the weight gradients of micro-batch 0");
  CHECK(refusal(twoStages({f0, b0, update}, {f0, inputs0, weights0, weights0, update})) ==
        prefix +
            "1 micro-batches): stage 1 runs the weight gradients of micro-batch 0 without its backward for "
            "the input gradients before it, or twice");
}
