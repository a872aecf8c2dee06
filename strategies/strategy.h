// How gradients and figures are combined across workers. The trainer is
// written against this interface, so multi-process strategies (mirrored,
// multi-worker mirrored) slot in without changing the loop.
//
// one_device: a single process; its compute threads are combined inside
// ReplicaSet, so every collective here is the identity.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/config/job_config.h"

namespace dtrain {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  // Rank 0 prints, writes metrics and checkpoints.
  bool isChief() const { return rank() == 0; }
  // Makes every worker start from rank 0's parameters.
  virtual void broadcastParameters(float* params, int64_t n) = 0;
  // Sums the gradients of all workers (each already scaled by 1/global batch).
  virtual void reduceGradients(float* grads, int64_t n) = 0;
  // Sums figures (loss sums, counts) across workers.
  virtual void reduceFigures(double* values, int64_t n) = 0;
};

// Creates the strategy the job names; unknown or unavailable ones throw ConfigError.
std::unique_ptr<Strategy> makeStrategy(const StrategySection& cfg);

}  // namespace dtrain
