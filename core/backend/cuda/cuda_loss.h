// DeviceLoss on a GPU: the loss kernel and its sums in device memory, the
// labels uploaded per call, the sums read back through pinned memory.
#pragma once
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/backend/device_loss.h"

namespace dtrain {

class CudaLoss : public DeviceLoss {
 public:
  CudaLoss(CudaContext& ctx, int64_t classes);
  void queue(const float* logits, const int32_t* host_labels, int64_t n, float grad_scale, float* dlogits,
             float smoothing) override;
  LossSums read() override;

 private:
  // The device's sums, zeroed after each read.
  struct Sums {
    double loss_sum;
    unsigned long long correct;
    int bad_label;
  };

  CudaContext& ctx_;
  int64_t classes_;
  std::shared_ptr<void> sums_;       // one Sums on the device
  std::shared_ptr<void> host_sums_;  // one Sums, pinned
  std::shared_ptr<void> labels_;     // device labels of the largest call so far
  int64_t labels_capacity_ = 0;
  int64_t samples_ = 0;  // queued since the last read
};

}  // namespace dtrain
