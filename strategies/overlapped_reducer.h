// Reduces gradient buckets across ranks while backward is still running:
// the compute threads report each finished layer (BackwardListener); once
// every replica has finished the layers of a bucket, a communication thread
// sums the replicas' gradients for that range and all-reduces it, in bucket
// order (the same on every rank, as the collectives require), while the
// compute threads go on with earlier layers.
//
// Threading: layerDone() is called by the compute threads; beginStep(),
// finish() and cancel() by the trainer's thread, once per step in that order.
// The functions given are called on the communication thread only.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/nn/layer.h"
#include "strategies/gradient_buckets.h"

namespace dtrain {

class OverlappedReducer : public BackwardListener {
 public:
  // Reduces the range [begin, end) of the gradient buffer: sums this
  // process's replicas into the first, then all-reduces it across ranks.
  using ReduceRange = std::function<void(int64_t begin, int64_t end)>;

  // `replicas`: how many threads run backward per step (each reports every
  // layer); `nodes`: the model's node count.
  OverlappedReducer(std::vector<GradientBucket> buckets, int replicas, int nodes, ReduceRange reduce);
  ~OverlappedReducer() override;
  OverlappedReducer(const OverlappedReducer&) = delete;
  OverlappedReducer& operator=(const OverlappedReducer&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // Before the step's backward starts.
  void beginStep();
  void layerDone(int node) override;
  // Waits until every bucket is reduced; rethrows a failure of the reduction.
  void finish();
  // The step failed before all layers were reported: stop waiting for them
  // (a reduction already under way completes first).
  void cancel();

 private:
  void run();

  std::vector<GradientBucket> buckets_;
  std::vector<std::vector<int>> buckets_of_node_;  // the buckets each node completes
  std::unique_ptr<std::atomic<int>[]> remaining_;  // per bucket: replicas yet to report
  int replicas_;
  ReduceRange reduce_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<char> ready_;  // per bucket, this step
  uint64_t step_ = 0;        // beginStep count
  bool finished_ = true, cancelled_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dtrain
