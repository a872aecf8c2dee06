#include "strategies/sharded/gathered_parameters.h"

#include <algorithm>
#include <utility>

#include "core/errors.h"
#include "core/util/process_memory.h"

namespace dtrain {

GatheredParameters::GatheredParameters(ProcessGroup& group, const ShardPlan& plan, float* params,
                                       LayerGroups groups, ReduceRange reduce)
    : group_(group),
      plan_(plan),
      params_(params),
      groups_(std::move(groups)),
      reduce_(std::move(reduce)),
      ready_(groups_.groups.size(), -1),
      done_(groups_.groups.size(), -1) {
  thread_ = std::thread([this] { run(); });
}

GatheredParameters::~GatheredParameters() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GatheredParameters::beginStep(int64_t micro_batches) {
  if (whole_) releaseAll();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first_pass_ = next_pass_;
    passes_ = 2 * micro_batches;
    next_pass_ += passes_;
    compute_pass_ = first_pass_ - 1;
    compute_backward_ = true;  // the first forward node starts the step's first pass
    peak_resident_ = 0;
    step_pending_ = true;
    step_finished_ = false;
    cancelled_ = false;
    error_ = nullptr;
  }
  changed_.notify_all();
}

template <class Pred>
void GatheredParameters::waitFor(std::unique_lock<std::mutex>& lock, Pred ready) {
  changed_.wait(lock, [&] { return ready() || error_ || cancelled_; });
  if (error_) std::rethrow_exception(error_);
  if (cancelled_) throw CommError("sharded: the step was abandoned while a layer waited for its parameters");
}

void GatheredParameters::beforeNode(int node, bool backward) {
  if (whole_) return;
  std::unique_lock<std::mutex> lock(mutex_);
  if (backward != compute_backward_) {
    ++compute_pass_;
    compute_backward_ = backward;
  }
  const auto i = static_cast<size_t>(node);
  const int64_t pass = compute_pass_;
  for (int g : {groups_.group_of_node[i], groups_.tied_group[i]})
    if (g >= 0) waitFor(lock, [&] { return ready_[static_cast<size_t>(g)] >= pass; });
}

void GatheredParameters::afterNode(int node, bool backward) {
  if (whole_) return;
  const int g = groups_.group_of_node[static_cast<size_t>(node)];
  if (g < 0) return;
  const LayerGroup& group = groups_.groups[static_cast<size_t>(g)];
  // The group is left after its last layer in the pass's direction.
  if (node != (backward ? group.first_node : group.last_node)) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_[static_cast<size_t>(g)] = compute_pass_;
  }
  changed_.notify_all();
}

void GatheredParameters::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return step_finished_; });
  if (error_) std::rethrow_exception(error_);
}

void GatheredParameters::cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return step_finished_; });
}

void GatheredParameters::gatherAll() {
  group_.allGatherInPlace(params_, plan_.countsWithin(0, plan_.total()));
  whole_ = true;
}

void GatheredParameters::releaseAll() {
  release(LayerGroup{0, plan_.total()});
  whole_ = false;
}

void GatheredParameters::gather(const LayerGroup& g) {
  group_.allGatherInPlace(params_ + g.begin, plan_.countsWithin(g.begin, g.end));
  peak_resident_ = std::max(peak_resident_, residentBytes(params_, plan_.total()));
}

void GatheredParameters::release(const LayerGroup& g) {
  // This worker's own part stays.
  plan_.forEachForeignPart(group_.rank(), g.begin, g.end,
                           [&](int64_t b, int64_t e) { releaseFloats(params_, b, e); });
}

void GatheredParameters::runPass(int64_t pass, bool backward, bool reduce) {
  const int count = static_cast<int>(groups_.groups.size());
  auto group = [&](int k) -> const LayerGroup& { return groups_.groups[static_cast<size_t>(k)]; };
  auto mark = [&](int k) {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_[static_cast<size_t>(k)] = pass;
  };
  // Waits until the compute thread has left group k in this pass; false when the step was abandoned.
  auto left = [&](int k) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return done_[static_cast<size_t>(k)] >= pass || cancelled_ || stopping_; });
    return done_[static_cast<size_t>(k)] >= pass;
  };
  auto leave = [&](int k) {
    if (reduce) reduce_(group(k).begin, group(k).end);
    if (!group(k).pinned) release(group(k));
  };
  // A tied weight's group comes first (its borrower may run before it in
  // either direction) and stays to the end of the backward pass.
  for (int k = 0; k < count; ++k)
    if (group(k).pinned) {
      if (!backward) gather(group(k));
      mark(k);
    }
  changed_.notify_all();
  int previous = -1;
  for (int step = 0; step < count; ++step) {
    const int k = backward ? count - 1 - step : step;
    if (!group(k).pinned) {
      gather(group(k));  // while the compute thread is in `previous`
      mark(k);
      changed_.notify_all();
    }
    if (previous >= 0) {
      if (!left(previous)) return;
      leave(previous);
    }
    previous = k;
  }
  if (previous >= 0) {
    if (!left(previous)) return;
    leave(previous);
  }
  if (backward)
    for (int k = 0; k < count; ++k)
      if (group(k).pinned) release(group(k));
}

void GatheredParameters::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || step_pending_; });
    if (stopping_) return;
    step_pending_ = false;
    const int64_t first = first_pass_, passes = passes_;
    lock.unlock();
    try {
      for (int64_t p = 0; p < passes; ++p) {
        const bool backward = p % 2 == 1;
        runPass(first + p, backward, backward && p + 1 == passes);
        std::lock_guard<std::mutex> guard(mutex_);
        if (cancelled_ || stopping_) break;
      }
    } catch (...) {
      std::lock_guard<std::mutex> guard(mutex_);
      error_ = std::current_exception();
    }
    lock.lock();
    step_finished_ = true;
    changed_.notify_all();
  }
}

}  // namespace dtrain
