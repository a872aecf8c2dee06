#include "strategies/pipeline/schedule_check.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

struct Message {
  Op kind;  // SendActivation or SendGradient
  int micro_batch;
  double ready;  // when the sender had it out
};

std::string stageName(int s) { return "stage " + std::to_string(s); }

// What the receive of `recv` expects its sender to have sent.
Op sentBy(Op recv) { return recv == Op::RecvActivation ? Op::SendActivation : Op::SendGradient; }

std::string what(Op sent, int micro_batch) {
  return std::string(sent == Op::SendActivation ? "the activation" : "the gradient") + " of micro-batch " +
         std::to_string(micro_batch);
}

class Checker {
 public:
  Checker(const Schedule& s, std::vector<double> forward, std::vector<double> backward)
      : schedule_(s),
        n_(s.config.stages),
        forward_(std::move(forward)),
        backward_(std::move(backward)),
        pc_(static_cast<size_t>(n_), 0),
        clock_(static_cast<size_t>(n_), 0.0),
        busy_(static_cast<size_t>(n_), 0.0),
        in_flight_(static_cast<size_t>(n_), 0),
        peak_(static_cast<size_t>(n_), 0) {
    prefix_ = "pipeline schedule (" + s.config.kind + ", " + std::to_string(n_) + " stages, " +
              std::to_string(s.config.micro_batches) + " micro-batches): ";
    if (forward_.empty()) forward_.assign(static_cast<size_t>(n_), 1.0);
    if (backward_.empty()) backward_.assign(static_cast<size_t>(n_), 2.0);
    if (static_cast<int>(forward_.size()) != n_ || static_cast<int>(backward_.size()) != n_)
      throw Error(prefix_ + "costs given for " + std::to_string(forward_.size()) + " stages");
  }

  ScheduleReport run() {
    if (static_cast<int>(schedule_.stages.size()) != n_)
      fail("lists for " + std::to_string(schedule_.stages.size()) + " stages");
    for (int s = 0; s < n_; ++s) checkCompleteness(s);
    for (;;) {
      bool moved = false, done = true;
      for (int s = 0; s < n_; ++s) {
        while (pc_[static_cast<size_t>(s)] < list(s).size() && step(s)) moved = true;
        done = done && pc_[static_cast<size_t>(s)] == list(s).size();
      }
      if (done) break;
      if (!moved) deadlock();
    }
    for (const auto& [pair, queue] : queues_)
      if (!queue.empty())
        fail(stageName(pair.first) + " sends " + what(queue.front().kind, queue.front().micro_batch) +
             " to " + stageName(pair.second) + ", which never receives it");
    ScheduleReport r;
    r.makespan = *std::max_element(clock_.begin(), clock_.end());
    double busy = 0;
    for (double b : busy_) busy += b;
    r.bubble_fraction = r.makespan > 0 ? 1.0 - busy / (n_ * r.makespan) : 0.0;
    r.peak_in_flight = peak_;
    r.order = std::move(order_);
    return r;
  }

 private:
  const std::vector<Action>& list(int s) const { return schedule_.stages[static_cast<size_t>(s)]; }

  [[noreturn]] void fail(const std::string& why) const { throw ConfigError(prefix_ + why); }

  // Every micro-batch forwarded and backwarded once, forward first (a split
  // backward: its input gradients, then its weight gradients); one update, last.
  void checkCompleteness(int s) const {
    const int m = schedule_.config.micro_batches;
    // Per micro-batch: forwards; backwards begun (Backward or BackwardInputs); weight passes.
    std::vector<int> forwards(static_cast<size_t>(m), 0), backwards(static_cast<size_t>(m), 0),
        weights(static_cast<size_t>(m), 0);
    std::vector<bool> split(static_cast<size_t>(m), false);
    int updates = 0;
    for (const Action& a : list(s)) {
      const bool compute = a.op == Op::Forward || a.op == Op::Backward || a.op == Op::BackwardInputs ||
                           a.op == Op::BackwardWeights;
      if ((compute || a.micro_batch >= 0) && (a.micro_batch < 0 || a.micro_batch >= m))
        fail(stageName(s) + ": " + describe(a) + " of " + std::to_string(m) + " micro-batches");
      const auto i = static_cast<size_t>(std::max(0, a.micro_batch));
      if (a.op == Op::Forward && forwards[i]++ > 0)
        fail(stageName(s) + " runs the " + describe(a) + " twice");
      if (a.op == Op::Backward || a.op == Op::BackwardInputs) {
        if (forwards[i] == 0) fail(stageName(s) + " runs the " + describe(a) + " before its forward");
        if (backwards[i]++ > 0)
          fail(stageName(s) + " runs the backward of micro-batch " + std::to_string(a.micro_batch) +
               " twice");
        split[i] = a.op == Op::BackwardInputs;
      }
      if (a.op == Op::BackwardWeights) {
        if (!split[i] || weights[i] > 0)
          fail(stageName(s) + " runs the " + describe(a) +
               " without its backward for the input gradients "
               "before it, or twice");
        ++weights[i];
      }
      if (a.op == Op::Update) ++updates;
    }
    for (int i = 0; i < m; ++i) {
      if (backwards[static_cast<size_t>(i)] == 0)
        fail(stageName(s) + " never runs the backward of micro-batch " + std::to_string(i));
      if (split[static_cast<size_t>(i)] && weights[static_cast<size_t>(i)] == 0)
        fail(stageName(s) + " never runs the weight gradients of micro-batch " + std::to_string(i));
    }
    if (updates != 1 || list(s).back().op != Op::Update)
      fail(stageName(s) + " must end with one update (it has " + std::to_string(updates) + ")");
  }

  // Runs stage s's next action if it can; false when it waits for a message.
  bool step(int s) {
    const auto i = static_cast<size_t>(s);
    const Action& a = list(s)[pc_[i]];
    switch (a.op) {
      case Op::Forward:
        clock_[i] += forward_[i];
        busy_[i] += forward_[i];
        peak_[i] = std::max(peak_[i], ++in_flight_[i]);
        break;
      case Op::Backward:
        clock_[i] += backward_[i];
        busy_[i] += backward_[i];
        --in_flight_[i];
        break;
      // A split backward: half its cost each (convolutions' and dense layers'
      // input and weight gradients are products of the same size).
      case Op::BackwardInputs:
        clock_[i] += backward_[i] / 2;
        busy_[i] += backward_[i] / 2;
        break;
      case Op::BackwardWeights:
        clock_[i] += backward_[i] / 2;
        busy_[i] += backward_[i] / 2;
        --in_flight_[i];  // its activations are read until now
        break;
      case Op::SendActivation:
      case Op::SendGradient: {
        const int to = a.op == Op::SendActivation ? s + 1 : s - 1;
        if (a.peer != to) fail(stageName(s) + ": " + describe(a) + "; it may only send to " + stageName(to));
        queues_[{s, to}].push_back(Message{a.op, a.micro_batch, clock_[i]});
        break;
      }
      case Op::RecvActivation:
      case Op::RecvGradient: {
        const int from = a.op == Op::RecvActivation ? s - 1 : s + 1;
        if (a.peer != from)
          fail(stageName(s) + ": " + describe(a) + "; it may only receive from " + stageName(from));
        std::deque<Message>& queue = queues_[{from, s}];
        if (queue.empty()) return false;
        const Message& head = queue.front();
        if (head.kind != sentBy(a.op) || head.micro_batch != a.micro_batch)
          fail(stageName(s) + " expects " + what(sentBy(a.op), a.micro_batch) + " from " + stageName(from) +
               ", which sends " + what(head.kind, head.micro_batch) + " first");
        clock_[i] = std::max(clock_[i], head.ready);
        queue.pop_front();
        break;
      }
      case Op::AllReduce:
      case Op::Update:
        break;
    }
    order_.emplace_back(s, pc_[i]);
    ++pc_[i];
    return true;
  }

  [[noreturn]] void deadlock() const {
    std::string waits;
    for (int s = 0; s < n_; ++s) {
      const auto i = static_cast<size_t>(s);
      if (pc_[i] == list(s).size()) continue;
      waits += (waits.empty() ? "" : ", ") + stageName(s) + " waits to " + describe(list(s)[pc_[i]]);
    }
    fail("deadlock: " + waits);
  }

  const Schedule& schedule_;
  int n_;
  std::vector<double> forward_, backward_;
  std::string prefix_;
  std::vector<size_t> pc_;
  std::vector<double> clock_, busy_;
  std::vector<int> in_flight_, peak_;
  std::map<std::pair<int, int>, std::deque<Message>> queues_;  // (from, to)
  std::vector<std::pair<int, size_t>> order_;
};

}  // namespace

ScheduleReport checkSchedule(const Schedule& schedule, const std::vector<double>& forward_cost,
                             const std::vector<double>& backward_cost) {
  return Checker(schedule, forward_cost, backward_cost).run();
}

}  // namespace dtrain::pipeline
