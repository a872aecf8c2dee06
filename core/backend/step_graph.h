// A GPU training step recorded once as a CUDA graph and replayed: one launch
// instead of a few hundred kernel and library calls, so the host's cost per
// step no longer grows with the model's layer count.
//
// Recording runs the host code of the step with the device's compute stream
// capturing: nothing is computed then, and the work is only executed by
// launch(). Device memory the recorded work takes from the caching allocator
// stays reserved for the graph until it is destroyed, so no other work is
// handed a buffer that a replay writes. Whatever changes between steps must
// come from device memory the host rewrites before each launch (StepScalars,
// the staged batch): a replay repeats every pointer and every by-value
// argument of the recording.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/tensor/tensor.h"

namespace dtrain {

class StepGraph;

// A recording in progress (the CUDA backend's side of StepGraph::record).
class StepRecording {
 public:
  virtual ~StepRecording() = default;
  // Stops recording: the graph, ready to launch; or null with the reason in
  // `why_not` when the recording failed or `keep` is false (nothing ran).
  virtual std::unique_ptr<StepGraph> finish(bool keep, std::string* why_not) = 0;
};

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Queues one replay on the device's compute stream.
  virtual void launch() = 0;

  // Records what `queue` queues on GPU `device`'s compute stream. Returns
  // null with the reason in `why_not` when the work cannot be recorded (a
  // call that is not allowed while capturing, such as a read-back to the
  // host): then nothing of it ran, and host state `queue` changed is the
  // caller's to undo before queueing the work again without recording.
  static std::unique_ptr<StepGraph> record(Device device, const std::function<void()>& queue,
                                           std::string* why_not);
};

}  // namespace dtrain
