// Synchronous data parallelism over processes: mirrored (one host, one
// process per device or CPU slot) and multi_worker_mirrored (several hosts)
// are the same engine; they differ only in how the processes were launched.
// Every rank starts from rank 0's weights, computes gradients on its slice of
// the global batch (already scaled by 1/global batch), and the gradients are
// summed across ranks, so every rank takes the identical optimizer step.
#pragma once
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "strategies/strategy.h"

namespace dtrain {

class MirroredStrategy : public Strategy {
 public:
  MirroredStrategy(std::string name, std::shared_ptr<ProcessGroup> group);
  std::string name() const override { return name_; }
  int rank() const override { return group_->rank(); }
  int worldSize() const override { return group_->size(); }
  std::string describeCollectives() const override { return group_->describe(); }
  void broadcastParameters(float* params, int64_t n) override;
  void broadcastFromChief(void* data, int64_t bytes) override;
  void reduceGradients(float* grads, int64_t n) override;
  void reduceFigures(double* values, int64_t n) override;
  ProcessGroup& group() { return *group_; }

 private:
  std::string name_;
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace dtrain
