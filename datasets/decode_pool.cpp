#include "datasets/decode_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace dtrain {

DecodePool::DecodePool(int threads, bool low_priority) {
  if (threads < 1) throw Error("DecodePool: threads must be >= 1, got " + std::to_string(threads));
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, low_priority] { workerLoop(low_priority); });
}

DecodePool::~DecodePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool DecodePool::run(int64_t n, const std::function<bool(int64_t)>& fn) {
  if (n <= 0) return true;
  fn_ = &fn;
  n_ = n;
  next_.store(0);
  error_index_.store(n);
  cancelled_.store(false);
  error_ = nullptr;
  // One sample needs no help (and waking the workers would cost more than it).
  const bool shared = !workers_.empty() && n > 1;
  if (shared) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++job_;
      busy_workers_ = static_cast<int>(workers_.size());
    }
    wake_.notify_all();
  }
  work();
  if (shared) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return busy_workers_ == 0; });
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
  return !cancelled_.load();
}

void DecodePool::work() {
  for (;;) {
    if (cancelled_.load(std::memory_order_relaxed)) return;
    const int64_t i = next_.fetch_add(1);
    // Indices are claimed in increasing order: past an error, nothing lower is left.
    if (i >= n_ || i > error_index_.load()) return;
    try {
      if (!(*fn_)(i)) {
        cancelled_.store(true);
        return;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (i < error_index_.load()) {
        error_index_.store(i);
        error_ = std::current_exception();
      }
    }
  }
}

void DecodePool::workerLoop(bool low_priority) {
  // Below the compute threads, as the loader thread is (see batch_loader.cpp).
  if (low_priority) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || job_ != seen; });
      if (stop_) return;
      seen = job_;
    }
    work();
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_workers_ == 0) done_.notify_one();
  }
}

}  // namespace dtrain
