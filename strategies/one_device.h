// One process on one device: nothing to combine.
#pragma once
#include "strategies/strategy.h"

namespace dtrain {

class OneDeviceStrategy : public Strategy {
 public:
  std::string name() const override { return "one_device"; }
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  void broadcastParameters(float*, int64_t) override {}
  void broadcastFromChief(void*, int64_t) override {}
  void reduceGradients(float*, int64_t) override {}
  void reduceFigures(double*, int64_t) override {}
};

}  // namespace dtrain
