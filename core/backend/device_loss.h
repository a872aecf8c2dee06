// The loss of a batch on a compute device: softmax cross-entropy queued on the
// device behind the forward pass, its sums read back once per step (a read
// waits for the device), so the host can queue backward and the update
// meanwhile instead of waiting for the logits.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor/tensor.h"

namespace dtrain {

struct LossSums {
  double loss_sum = 0;  // sum of the per-sample losses
  int64_t correct = 0;  // samples whose first maximal logit is the label
  int64_t samples = 0;
};

class DeviceLoss {
 public:
  virtual ~DeviceLoss() = default;
  // The loss for `device` (not the CPU: it computes ops::softmaxCrossEntropy
  // directly). Throws DeviceError for a device this build cannot drive.
  static std::unique_ptr<DeviceLoss> make(Device device, int64_t classes);

  // Queues the loss of n rows of logits (device memory) against host labels
  // smoothed by `smoothing` (ops::softmaxCrossEntropy's meaning); dlogits
  // (device memory, nullable) gets (softmax - target) * grad_scale.
  virtual void queue(const float* logits, const int32_t* host_labels, int64_t n, float grad_scale,
                     float* dlogits, float smoothing = 0.0f) = 0;
  // Waits for the device and returns the sums of everything queued since the
  // last read. Throws Error when a label was outside [0, classes).
  virtual LossSums read() = 0;
};

}  // namespace dtrain
