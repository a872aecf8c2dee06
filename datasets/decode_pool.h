// DecodePool: the threads that prepare one batch's samples together. run()
// hands out the batch's indices one at a time (an atomic counter, so a slow
// JPEG does not hold up a whole share) to the calling thread and threads - 1
// workers, and returns when all are done. Each sample goes to its own place,
// so the batch is the same whatever the thread count or the timing.
//
// Errors: when fn throws, run() rethrows the exception of the lowest index
// that threw (every lower index has run by then), so the error a batch reports
// does not depend on timing; indices above it are skipped. fn returning false
// cancels: unclaimed indices are skipped and run() returns false.
// Ownership: owns its worker threads (joined by the destructor). Threading:
// run() is called from one thread at a time; workers sleep between calls (and
// may run below normal priority, like the loader thread they serve).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain {

class DecodePool {
 public:
  // `threads` >= 1 counts the calling thread: 1 starts no worker.
  // `low_priority`: the workers run below normal priority.
  explicit DecodePool(int threads, bool low_priority = true);
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) once for every i in [0, n) (see above for errors and
  // cancellation); true when every call returned true.
  bool run(int64_t n, const std::function<bool(int64_t)>& fn);

 private:
  void workerLoop(bool low_priority);
  // Claims and runs indices of the current job until none are left.
  void work();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;  // a new job, or stop
  std::condition_variable done_;  // the last worker finished the job
  // Guarded by mu_.
  uint64_t job_ = 0;      // bumped per run() with workers to wake
  int busy_workers_ = 0;  // workers not yet finished with job_
  bool stop_ = false;
  std::exception_ptr error_;

  // The current job: written by run() before waking the workers.
  const std::function<bool(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> error_index_{0};  // lowest index that threw (n_ when none)
  std::atomic<bool> cancelled_{false};
};

}  // namespace dtrain
