// SingleProcessGroup: the group of one rank. Every collective is a copy or
// nothing, so a one-device run goes through the same strategy code as a
// multi-rank one without sockets or a store. Arguments are still checked as
// a real group checks them, so a strategy bug shows up on one device too.
#pragma once
#include "core/comm/process_group.h"

namespace dtrain {

class SingleProcessGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }

  void allReduceSum(float* data, int64_t n) override;
  void allReduceSum(double* data, int64_t n) override;
  void broadcast(float* data, int64_t n, int root) override;
  void broadcastBytes(uint8_t* data, int64_t n, int root) override;
  void allGather(const float* in, int64_t n, float* out) override;
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts) override;
  void barrier() override {}
};

}  // namespace dtrain
