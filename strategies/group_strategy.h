// What the strategies whose workers are the ranks of one ProcessGroup share
// (mirrored and multi_worker_mirrored, central_storage, sharded): their rank
// and count are the group's, rank 0 is the chief, and the broadcasts and the
// figures' sums are the group's collectives.
#pragma once
#include <memory>
#include <utility>

#include "core/comm/process_group.h"
#include "core/train/strategy.h"

namespace dtrain {

class GroupStrategy : public Strategy {
 public:
  explicit GroupStrategy(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int worldSize() const override { return group_->size(); }
  void broadcastParameters(float* params, int64_t n) override { group_->broadcast(params, n, 0); }
  void broadcastFromChief(void* data, int64_t bytes) override {
    group_->broadcastBytes(static_cast<uint8_t*>(data), bytes, 0);
  }
  void reduceFigures(double* values, int64_t n) override { group_->allReduceSum(values, n); }

 protected:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace dtrain
