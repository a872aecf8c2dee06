#include "core/backend/cuda/cuda_loss.h"

#include <cstring>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/loss_kernels.h"
#include "core/errors.h"

namespace dtrain {

CudaLoss::CudaLoss(CudaContext& ctx, int64_t classes) : ctx_(ctx), classes_(classes) {
  sums_ = ctx_.allocate(sizeof(Sums));
  host_sums_ = cudaPinnedHost(sizeof(Sums));
  if (!host_sums_) throw DeviceError("CUDA: could not allocate pinned host memory for the loss");
  checkCuda(cudaMemsetAsync(sums_.get(), 0, sizeof(Sums), ctx_.stream()), "zero the loss sums");
}

void CudaLoss::queue(const float* logits, const int32_t* host_labels, int64_t n, float grad_scale,
                     float* dlogits, float smoothing) {
  if (n <= 0) return;
  if (n > labels_capacity_) {
    labels_ = ctx_.allocate(static_cast<size_t>(n) * sizeof(int32_t));
    labels_capacity_ = n;
  }
  // From pageable memory: returns once the labels are staged, so the caller may reuse them.
  checkCuda(cudaMemcpyAsync(labels_.get(), host_labels, static_cast<size_t>(n) * sizeof(int32_t),
                            cudaMemcpyHostToDevice, ctx_.stream()),
            "upload labels");
  auto* sums = static_cast<Sums*>(sums_.get());
  cuda::softmaxCrossEntropy(logits, static_cast<const int32_t*>(labels_.get()), n, classes_, grad_scale,
                            dlogits, &sums->loss_sum, &sums->correct, &sums->bad_label, ctx_.stream(),
                            smoothing);
  checkCuda(cudaGetLastError(), "launch the loss kernel");
  samples_ += n;
}

LossSums CudaLoss::read() {
  checkCuda(
      cudaMemcpyAsync(host_sums_.get(), sums_.get(), sizeof(Sums), cudaMemcpyDeviceToHost, ctx_.stream()),
      "read the loss");
  checkCuda(cudaMemsetAsync(sums_.get(), 0, sizeof(Sums), ctx_.stream()), "zero the loss sums");
  ctx_.synchronize();
  Sums got;
  std::memcpy(&got, host_sums_.get(), sizeof got);
  LossSums out{got.loss_sum, static_cast<int64_t>(got.correct), samples_};
  samples_ = 0;
  if (got.bad_label)
    throw Error("a label of the batch is outside [0, " + std::to_string(classes_) +
                "); the dataset's labels do not match its class count");
  return out;
}

}  // namespace dtrain
