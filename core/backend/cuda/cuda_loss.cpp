#include "core/backend/cuda/cuda_loss.h"

#include <cstring>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/loss_kernels.h"
#include "core/errors.h"

namespace dtrain {

CudaLoss::CudaLoss(CudaContext& ctx, int64_t classes, int64_t width)
    : ctx_(ctx), classes_(classes), width_(width), copied_(static_cast<size_t>(kMaxPendingSnapshots)) {
  sums_ = ctx_.allocate(sizeof(Sums));
  host_sums_ = cudaPinnedHost(sizeof(Sums) * kMaxPendingSnapshots);
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
  queueOnDevice(logits, static_cast<const int32_t*>(labels_.get()), n, grad_scale, dlogits, smoothing);
}

void CudaLoss::queueOnDevice(const float* logits, const int32_t* device_labels, int64_t n, float grad_scale,
                             float* dlogits, float smoothing) {
  if (n <= 0) return;
  auto* sums = static_cast<Sums*>(sums_.get());
  if (width_ > 0) {  // the rows counted are summed on the device
    cuda::tokenCrossEntropy(logits, device_labels, n, width_, classes_, grad_scale, dlogits, &sums->loss_sum,
                            &sums->correct, &sums->counted, &sums->bad_label, ctx_.stream(), smoothing);
    checkCuda(cudaGetLastError(), "launch the loss kernel");
    return;
  }
  cuda::softmaxCrossEntropy(logits, device_labels, n, classes_, grad_scale, dlogits, &sums->loss_sum,
                            &sums->correct, &sums->bad_label, ctx_.stream(), smoothing);
  checkCuda(cudaGetLastError(), "launch the loss kernel");
  samples_ += n;
}

void CudaLoss::snapshot() {
  if (pendingSnapshots() >= kMaxPendingSnapshots)
    throw Error("CudaLoss: " + std::to_string(kMaxPendingSnapshots) +
                " loss snapshots are pending already; take one first");
  const int slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % kMaxPendingSnapshots;
  auto* host = static_cast<Sums*>(host_sums_.get()) + slot;
  checkCuda(cudaMemcpyAsync(host, sums_.get(), sizeof(Sums), cudaMemcpyDeviceToHost, ctx_.stream()),
            "copy the loss sums");
  checkCuda(cudaMemsetAsync(sums_.get(), 0, sizeof(Sums), ctx_.stream()), "zero the loss sums");
  copied_[static_cast<size_t>(slot)].record(ctx_.stream());
  pending_.push_back({slot, samples_});
  samples_ = 0;
}

LossSums CudaLoss::takeSnapshot() {
  if (pending_.empty()) throw Error("CudaLoss: no loss snapshot is pending");
  const Pending p = pending_.front();
  pending_.pop_front();
  const CudaEvent& copied = copied_[static_cast<size_t>(p.slot)];
  // Waits only when the device is more than a step behind: the step queued
  // since keeps it busy meanwhile.
  if (!copied.done()) copied.waitAhead();
  Sums got;
  std::memcpy(&got, static_cast<const Sums*>(host_sums_.get()) + p.slot, sizeof got);
  if (got.bad_label)
    throw Error("a label of the batch is outside [0, " + std::to_string(classes_) +
                "); the dataset's labels do not match its class count");
  return LossSums{got.loss_sum, static_cast<int64_t>(got.correct),
                  p.samples + static_cast<int64_t>(got.counted)};
}

}  // namespace dtrain
