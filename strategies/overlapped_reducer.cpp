#include "strategies/overlapped_reducer.h"

#include <utility>

namespace dtrain {

OverlappedReducer::OverlappedReducer(std::vector<GradientBucket> buckets, int replicas, int nodes,
                                     ReduceRange reduce)
    : buckets_(std::move(buckets)),
      buckets_of_node_(static_cast<size_t>(nodes)),
      remaining_(new std::atomic<int>[buckets_.size()]),
      replicas_(replicas),
      reduce_(std::move(reduce)),
      ready_(buckets_.size(), 0) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_of_node_.at(static_cast<size_t>(buckets_[b].ready_after_node)).push_back(static_cast<int>(b));
    remaining_[b].store(replicas_);
  }
  thread_ = std::thread([this] { run(); });
}

OverlappedReducer::~OverlappedReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void OverlappedReducer::beginStep() {
  for (size_t b = 0; b < buckets_.size(); ++b) remaining_[b].store(replicas_, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fill(ready_.begin(), ready_.end(), 0);
    finished_ = false;
    cancelled_ = false;
    error_ = nullptr;
    ++step_;
  }
  changed_.notify_all();
}

void OverlappedReducer::layerDone(int node) {
  // The last replica to finish a bucket's earliest layer hands it over (each
  // replica reports its layers in reverse order, so every later layer of the
  // bucket is done by then). A large layer may complete several buckets.
  bool any = false;
  for (int b : buckets_of_node_[static_cast<size_t>(node)])
    if (remaining_[b].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_[static_cast<size_t>(b)] = 1;
      any = true;
    }
  if (any) changed_.notify_all();
}

void OverlappedReducer::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return finished_; });
  if (error_) std::rethrow_exception(error_);
}

void OverlappedReducer::cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return finished_; });
}

void OverlappedReducer::run() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || step_ != seen; });
    if (stopping_) return;
    seen = step_;
    // Buckets in order: every rank issues the same collectives in the same order.
    for (size_t b = 0; b < buckets_.size() && !cancelled_ && !error_; ++b) {
      changed_.wait(lock, [&] { return ready_[b] || cancelled_ || stopping_; });
      if (!ready_[b]) break;
      lock.unlock();
      try {
        reduce_(buckets_[b].begin, buckets_[b].end);
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        break;
      }
      lock.lock();
    }
    finished_ = true;
    changed_.notify_all();
    if (stopping_) return;
  }
}

}  // namespace dtrain
