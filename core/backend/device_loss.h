// The loss of a batch on a compute device: softmax cross-entropy queued on the
// device behind the forward pass. Its sums are taken as snapshots: a snapshot
// queues their copy into pinned host memory and starts new sums without
// waiting, and is read a step later, when the device has long got there, so
// the host queues step after step without ever waiting for the GPU.
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
  // Snapshots that may wait to be taken at once.
  static constexpr int kMaxPendingSnapshots = 4;

  virtual ~DeviceLoss() = default;
  // The loss for `device` (not the CPU: it computes ops::softmaxCrossEntropy
  // directly). Throws DeviceError for a device this build cannot drive.
  // `width` > 0: a language model's per-position rows (ops::tokenCrossEntropy's
  // meaning): each row holds `width` logits of which the first `classes` are
  // the vocabulary (the rest take no probability and get a zero gradient), a
  // negative label is a padding token (no loss, a zero gradient, not
  // counted), and the sums' samples are the rows counted, on the device.
  static std::unique_ptr<DeviceLoss> make(Device device, int64_t classes, int64_t width = 0);

  // Queues the loss of n rows of logits (device memory) against labels, on
  // the host (queue) or already on the device (queueOnDevice), smoothed by
  // `smoothing` (ops::softmaxCrossEntropy's meaning); dlogits (device memory,
  // nullable) gets (softmax - target) * grad_scale.
  virtual void queue(const float* logits, const int32_t* host_labels, int64_t n, float grad_scale,
                     float* dlogits, float smoothing = 0.0f) = 0;
  virtual void queueOnDevice(const float* logits, const int32_t* device_labels, int64_t n, float grad_scale,
                             float* dlogits, float smoothing = 0.0f) = 0;
  // Queues the copy of the sums of everything queued since the last snapshot
  // and starts new ones; never waits. Throws Error when kMaxPendingSnapshots
  // are pending already.
  virtual void snapshot() = 0;
  // The oldest pending snapshot's sums; waits for the device only when it has
  // not reached the snapshot yet (a counted wait, core/backend/device_waits.h).
  // Throws Error when none is pending, or when a label was outside [0, classes).
  virtual LossSums takeSnapshot() = 0;
  virtual int pendingSnapshots() const = 0;
  // The host's count of samples queued since the last snapshot (the device
  // sums the rest). A replayed CUDA graph queues a loss the host never saw,
  // and a failed recording one that never ran: the caller sets it right.
  virtual int64_t queuedSamples() const = 0;
  virtual void setQueuedSamples(int64_t samples) = 0;
  // The sums of everything queued since the last snapshot, waiting for the
  // device (evaluation). Throws Error while training snapshots are pending.
  LossSums read();
};

}  // namespace dtrain
