#include "core/backend/step_graph.h"

#include <exception>

#include "core/backend/cuda_module.h"
#include "core/errors.h"

namespace dtrain {

std::unique_ptr<StepGraph> StepGraph::record(Device device, const std::function<void()>& queue,
                                             std::string* why_not) {
  if (device.isCpu()) throw Error("StepGraph::record is for GPUs; the CPU runs each step as it comes");
  std::unique_ptr<StepRecording> recording = cudaBackend(device).recordStep(device.index);
  try {
    queue();
  } catch (const std::exception& e) {
    // A call the recording refused (or any other failure): nothing ran, and
    // queueing the work again without recording shows whether it was the recording.
    recording->finish(false, nullptr);
    if (why_not) *why_not = e.what();
    return nullptr;
  }
  return recording->finish(true, why_not);
}

}  // namespace dtrain
