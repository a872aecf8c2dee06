#include "strategies/pipeline/schedule.h"

#include <algorithm>

#include "core/errors.h"

namespace dtrain::pipeline {

std::string describe(const Action& a) {
  const std::string mb = "micro-batch " + std::to_string(a.micro_batch);
  const std::string peer = "stage " + std::to_string(a.peer);
  switch (a.op) {
    case Op::Forward:
      return "forward of " + mb;
    case Op::Backward:
      return "backward of " + mb;
    case Op::BackwardInputs:
      return "backward of " + mb + " for its input gradients";
    case Op::BackwardWeights:
      return "weight gradients of " + mb;
    case Op::SendActivation:
      return "send the activation of " + mb + " to " + peer;
    case Op::RecvActivation:
      return "receive the activation of " + mb + " from " + peer;
    case Op::SendGradient:
      return "send the gradient of " + mb + " to " + peer;
    case Op::RecvGradient:
      return "receive the gradient of " + mb + " from " + peer;
    case Op::AllReduce:
      return "all-reduce over the stage's replicas";
    case Op::Update:
      return "update";
  }
  return "?";
}

namespace {

// A micro-batch's forward on stage s of n, with its input received and its output sent on.
void forward(std::vector<Action>& out, int s, int n, int m) {
  if (s > 0) out.push_back({Op::RecvActivation, m, s - 1});
  out.push_back({Op::Forward, m, -1});
  if (s + 1 < n) out.push_back({Op::SendActivation, m, s + 1});
}

// Its backward, with its output's gradient received and its input's sent
// back; `split`: the weight gradients after the send.
void backward(std::vector<Action>& out, int s, int n, int m, bool split = false) {
  if (s + 1 < n) out.push_back({Op::RecvGradient, m, s + 1});
  split = split && s > 0;  // the first stage sends nothing back
  out.push_back({split ? Op::BackwardInputs : Op::Backward, m, -1});
  if (s > 0) out.push_back({Op::SendGradient, m, s - 1});
  if (split) out.push_back({Op::BackwardWeights, m, -1});
}

}  // namespace

Schedule compileSchedule(const ScheduleConfig& c) {
  if (c.stages < 1) throw ConfigError("strategy.stages = " + std::to_string(c.stages) + ": need at least 1");
  if (c.micro_batches < 1)
    throw ConfigError("strategy.micro_batches = " + std::to_string(c.micro_batches) + ": need at least 1");
  if (c.replicas < 1)
    throw ConfigError("strategy.replicas = " + std::to_string(c.replicas) + ": need at least 1");
  if (c.kind != "gpipe" && c.kind != "1f1b")
    throw ConfigError("strategy.schedule = \"" + c.kind + "\": expected \"gpipe\" or \"1f1b\"");
  if (c.kind == "1f1b" && c.micro_batches < c.stages)
    throw ConfigError("strategy.schedule = \"1f1b\" with " + std::to_string(c.micro_batches) +
                      " micro-batches over " + std::to_string(c.stages) +
                      " stages: 1f1b needs micro_batches >= stages; raise micro_batches or use "
                      "schedule = \"gpipe\"");
  Schedule out{c, std::vector<std::vector<Action>>(static_cast<size_t>(c.stages))};
  const int n = c.stages, m = c.micro_batches;
  for (int s = 0; s < n; ++s) {
    std::vector<Action>& list = out.stages[static_cast<size_t>(s)];
    // The backwards after a stage's last forward are split (see schedule.h).
    if (c.kind == "gpipe") {
      for (int i = 0; i < m; ++i) forward(list, s, n, i);
      for (int i = 0; i < m; ++i) backward(list, s, n, i, true);
    } else {
      // The last stage alternates from the start; each earlier stage runs one
      // more forward ahead, which is what reaches the last stage while its
      // backwards travel back.
      const int warmup = std::min(n - s - 1, m);
      for (int i = 0; i < warmup; ++i) forward(list, s, n, i);
      for (int i = 0; i + warmup < m; ++i) {
        forward(list, s, n, i + warmup);
        backward(list, s, n, i, i + warmup == m - 1);
      }
      for (int i = m - warmup; i < m; ++i) backward(list, s, n, i, true);
    }
    if (c.replicas > 1) list.push_back({Op::AllReduce, -1, -1});
    list.push_back({Op::Update, -1, -1});
  }
  return out;
}

}  // namespace dtrain::pipeline
