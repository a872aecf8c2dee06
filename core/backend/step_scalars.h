// The few numbers a GPU training step's queued work takes from the host that
// change from step to step: the dropout seed and the batch's first global
// row, and the optimizer's step scalars (learning rate, bias corrections).
// They sit in device memory and the kernels read them there, so a step
// recorded once as a CUDA graph (core/backend/step_graph.h) replays with each
// step's own values: the host writes them into the buffer before each step.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor/tensor.h"

namespace dtrain {

struct StepScalars {
  static constexpr int kOptimizerBytes = 64;
  uint64_t seed = 0;          // LayerContext::seed
  int64_t sample_offset = 0;  // LayerContext::sample_offset of the pass
  // The update's scalars as the optimizer's kernel reads them (an
  // update_rules::SgdScalars or AdamScalars, written by Optimizer::writeStepScalars).
  alignas(16) unsigned char optimizer[kOptimizerBytes] = {};
};

// One StepScalars in device memory, rewritten each step.
class StepScalarsBuffer {
 public:
  virtual ~StepScalarsBuffer() = default;
  // For GPU `device`; throws DeviceError as the CUDA backend does.
  static std::unique_ptr<StepScalarsBuffer> make(Device device);
  // Where the kernels read the scalars (device memory).
  virtual const StepScalars* onDevice() const = 0;
  // Queues the copy of `scalars` into onDevice() on the compute stream: work
  // queued after it reads them, work queued before it still reads the old
  // ones. Through pinned slots reused in turn, so it never waits for the
  // device unless the device is several steps behind.
  virtual void upload(const StepScalars& scalars) = 0;
};

}  // namespace dtrain
