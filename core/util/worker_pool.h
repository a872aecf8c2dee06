// A fixed set of threads that run one function together: run(fn) calls
// fn(0) on the calling thread and fn(1..n-1) on the workers, and returns when
// all have finished. The trainer uses it once or twice per step, so workers
// spin briefly before sleeping (a step is milliseconds; a futex wake-up per
// call would cost more than the work it splits on small models).
//
// Thread-safety: run() is called from one thread at a time. An exception thrown
// by any fn is rethrown by run() (the first one) after all have finished.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return size_; }
  void run(const std::function<void(int)>& fn);

  // [begin, end) of part `i` when `n` items are split into `parts` near-equal
  // contiguous parts, aligned to `align` items.
  static std::pair<int64_t, int64_t> split(int64_t n, int parts, int i, int64_t align = 1);

  // Sets the calling thread to flush denormal floats to zero (as TensorFlow
  // does on CPUs): tiny gradients otherwise slow the arithmetic down.
  static void flushDenormals();

 private:
  void workerLoop(int index);
  void record(std::exception_ptr e);

  int size_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace dtrain
