// DeviceLoss on a GPU: the loss kernel and its sums in device memory, the
// labels uploaded per call (or given on the device), each snapshot's sums
// copied into a pinned slot of their own and an event recorded behind the
// copy, so taking it waits only when the device has not got there yet.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/device_loss.h"

namespace dtrain {

class CudaLoss : public DeviceLoss {
 public:
  // `width` > 0: per-position rows (DeviceLoss::make).
  CudaLoss(CudaContext& ctx, int64_t classes, int64_t width = 0);
  void queue(const float* logits, const int32_t* host_labels, int64_t n, float grad_scale, float* dlogits,
             float smoothing) override;
  void queueOnDevice(const float* logits, const int32_t* device_labels, int64_t n, float grad_scale,
                     float* dlogits, float smoothing) override;
  void snapshot() override;
  LossSums takeSnapshot() override;
  int pendingSnapshots() const override { return static_cast<int>(pending_.size()); }
  int64_t queuedSamples() const override { return samples_; }
  void setQueuedSamples(int64_t samples) override { samples_ = samples; }

 private:
  // The device's sums, zeroed after each snapshot.
  struct Sums {
    double loss_sum;
    unsigned long long correct;
    unsigned long long counted;  // per-position rows: those not padding
    int bad_label;
  };
  struct Pending {
    int slot;
    int64_t samples;
  };

  CudaContext& ctx_;
  int64_t classes_;
  int64_t width_;                    // > 0: per-position rows of this many logits
  std::shared_ptr<void> sums_;       // one Sums on the device
  std::shared_ptr<void> host_sums_;  // kMaxPendingSnapshots Sums, pinned
  std::vector<CudaEvent> copied_;    // per slot: recorded behind its copy
  std::deque<Pending> pending_;      // oldest first
  int next_slot_ = 0;
  std::shared_ptr<void> labels_;  // device labels of the largest call so far
  int64_t labels_capacity_ = 0;
  int64_t samples_ = 0;  // queued since the last snapshot
};

}  // namespace dtrain
