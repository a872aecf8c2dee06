// How gradients and figures are combined across workers. The trainer is
// written against this interface, so multi-process strategies (mirrored,
// multi-worker mirrored) slot in without changing the loop.
//
// one_device: a single process; its compute threads are combined inside
// ReplicaSet, so every collective here is the identity.
// mirrored / multi_worker_mirrored: one process per device or CPU slot, on
// one host or several, combined by a ProcessGroup (shared memory on one
// host, Gloo over TCP across hosts).
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
  // What carries the collectives, for the start-up line ("" when nothing does).
  virtual std::string describeCollectives() const { return ""; }
  // Rank 0 prints, writes metrics and checkpoints.
  bool isChief() const { return rank() == 0; }
  // Makes every worker start from rank 0's parameters.
  virtual void broadcastParameters(float* params, int64_t n) = 0;
  // Copies the chief's bytes to every worker (positions, counters).
  virtual void broadcastFromChief(void* data, int64_t bytes) = 0;
  // Sums the gradients of all workers (each already scaled by 1/global batch).
  virtual void reduceGradients(float* grads, int64_t n) = 0;
  // Sums figures (loss sums, counts) across workers.
  virtual void reduceFigures(double* values, int64_t n) = 0;
};

// Creates the single-process strategy for the job; multi-process strategies
// are made by the launcher once the process group exists. Unknown or
// unavailable ones throw ConfigError.
std::unique_ptr<Strategy> makeStrategy(const StrategySection& cfg);

}  // namespace dtrain
