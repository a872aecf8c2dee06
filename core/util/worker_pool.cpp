#include "core/util/worker_pool.h"

#include <algorithm>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace dtrain {

void WorkerPool::flushDenormals() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // flush-to-zero and denormals-are-zero
#endif
}

WorkerPool::WorkerPool(int threads) : size_(std::max(1, threads)) {
  flushDenormals();
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { workerLoop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::record(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!error_) error_ = e;
}

void WorkerPool::run(const std::function<void(int)>& fn) {
  error_ = nullptr;
  if (size_ > 1) {
    job_ = &fn;
    remaining_.store(size_ - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
  }
  try {
    fn(0);
  } catch (...) {
    record(std::current_exception());
  }
  while (remaining_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::workerLoop(int index) {
  flushDenormals();
  uint64_t seen = 0;
  for (;;) {
    // Spin a little: the next step's call usually comes within microseconds.
    for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen; ++spin)
      std::this_thread::yield();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    try {
      (*job_)(index);
    } catch (...) {
      record(std::current_exception());
    }
    remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

std::pair<int64_t, int64_t> WorkerPool::split(int64_t n, int parts, int i, int64_t align) {
  int64_t units = (n + align - 1) / align;
  int64_t begin = units * i / parts * align, end = units * (i + 1) / parts * align;
  return {std::min(begin, n), std::min(end, n)};
}

}  // namespace dtrain
