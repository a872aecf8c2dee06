// The optimizer contract: one update rule over a flat parameter buffer.
//
// All parameters of a model live in one contiguous float buffer and all
// gradients in another with the same layout; an optimizer's state buffers
// (momentum, Adam moments) use that layout too, so element i of every buffer
// belongs to the same scalar parameter.
//
// On a GPU (init with a CUDA device) the state lives in device memory, the
// pointers given to update() are device pointers, and an update is one fused
// kernel queued on the device's compute stream.
//
// Ownership: an Optimizer owns its state buffers; it never owns the parameter
// or gradient buffers it is handed.
// Threading: init() and stateBuffers() must not run concurrently with anything
// else. update() calls on disjoint [begin, end) ranges may run concurrently:
// an update reads and writes only that range of params, grads and state, and
// keeps no other mutable state.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/half_copy.h"
#include "core/backend/step_scalars.h"
#include "core/config/job_config.h"
#include "core/optim/decay_mask.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// Per-update facts shared by all ranges of one step.
struct StepInfo {
  double lr;     // learning rate for this update (already scheduled)
  int64_t step;  // 1-based count of updates, including this one (Adam bias correction)
  // GPU: the kernel reads the update's scalars from here (device memory, as
  // writeStepScalars wrote them) instead of taking lr and step by value, so
  // an update recorded in a CUDA graph replays with each step's own.
  const StepScalars* on_device = nullptr;
  // GPU: a 16-bit copy of all the parameters (the flat layout, from element
  // 0) that the update writes too (core/backend/half_copy.h); no data: none.
  HalfCopy half_copy{};
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // The job file's type name: "sgd", "adam", "adamw".
  virtual std::string name() const = 0;
  // Allocates state for `n` parameters (zeros) on `device`. Calling it again resets the state.
  virtual void init(int64_t n, Device device) = 0;
  void init(int64_t n) { init(n, Device::cpu()); }
  // Updates params[begin,end) from grads[begin,end). Thread-safe for disjoint ranges.
  // Throws Error when the range lies outside [0, n) of init().
  virtual void update(float* params, const float* grads, int64_t begin, int64_t end,
                      const StepInfo& info) = 0;
  // This update's scalars (lr, step) in the form its GPU kernel reads from
  // StepInfo::on_device: the same floats update() computes by value.
  virtual void writeStepScalars(const StepInfo& info, StepScalars& out) const = 0;
  // State buffers by name ("momentum"; "adam_m", "adam_v"), each n floats in the
  // parameter layout, valid after init(); for checkpoints, which may overwrite
  // their contents. SGD without momentum has none.
  virtual std::vector<std::pair<std::string, Tensor*>> stateBuffers() = 0;

  // Which parameters the weight decay applies to (AdamW's; SGD and Adam add
  // theirs to every gradient, as PyTorch's do): all of them until set. Not
  // reset by init().
  void setDecayMask(DecayMask mask) { decay_mask_ = std::move(mask); }
  const DecayMask& decayMask() const { return decay_mask_; }

 protected:
  DecayMask decay_mask_;
};

// Builds the optimizer named by cfg.type. Throws ConfigError for an unknown
// type (the message lists the valid ones) or inconsistent settings.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerSection& cfg);

// For implementations: throws Error unless 0 <= begin <= end <= n.
void checkUpdateRange(const std::string& optimizer, int64_t begin, int64_t end, int64_t n);

}  // namespace dtrain
