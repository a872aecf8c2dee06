#include "core/backend/cuda/cuda_batch_stager.h"

#include <cstring>
#include <string>

#include "core/backend/cuda/cuda_check.h"
#include "core/errors.h"

namespace dtrain {

CudaBatchStager::CudaBatchStager(CudaContext& ctx, int64_t max_image_floats, int64_t max_labels)
    : ctx_(ctx), max_image_floats_(max_image_floats), max_labels_(max_labels) {
  for (Buffer& b : buffers_) {
    b.images = ctx_.allocate(static_cast<size_t>(max_image_floats) * sizeof(float));
    b.labels = ctx_.allocate(static_cast<size_t>(max_labels) * sizeof(int32_t));
    b.pinned_labels = cudaPinnedHost(static_cast<size_t>(max_labels) * sizeof(int32_t));
    if (!b.pinned_labels) throw DeviceError("CUDA: could not allocate pinned host memory for the labels");
  }
}

CudaBatchStager::~CudaBatchStager() {
  // The device buffers go back to the caching allocator, which hands them out
  // for work on the compute stream: no copy may still be writing them.
  try {
    copies_.synchronize();
  } catch (...) {  // a failing device: nothing is left to protect
  }
}

BatchStager::Staged CudaBatchStager::stage(const float* images, int64_t image_floats, const int32_t* labels,
                                           int64_t n) {
  if (image_floats > max_image_floats_ || n > max_labels_)
    throw Error("CudaBatchStager: a batch of " + std::to_string(n) + " samples (" +
                std::to_string(image_floats) + " floats) exceeds its buffers (" +
                std::to_string(max_labels_) + " samples, " + std::to_string(max_image_floats_) + " floats)");
  Buffer& b = buffers_[next_];
  // The pinned labels are rewritten by the host: their last copy must have
  // run. It has, two steps on, unless the device is that far behind, with
  // the steps since queued behind that copy: the host is held back, the
  // device kept busy.
  if (!b.copied.done()) b.copied.waitAhead();
  std::memcpy(b.pinned_labels.get(), labels, static_cast<size_t>(n) * sizeof(int32_t));
  b.freed.makeWait(copies_);  // the step before last has finished reading this buffer
  checkCuda(cudaMemcpyAsync(b.images.get(), images, static_cast<size_t>(image_floats) * sizeof(float),
                            cudaMemcpyHostToDevice, copies_.get()),
            "copy a batch's images to the GPU");
  checkCuda(cudaMemcpyAsync(b.labels.get(), b.pinned_labels.get(), static_cast<size_t>(n) * sizeof(int32_t),
                            cudaMemcpyHostToDevice, copies_.get()),
            "copy a batch's labels to the GPU");
  b.copied.record(copies_);
  b.copied.makeWait(ctx_.stream());  // the step reads the batch only once it is there
  current_ = next_;
  next_ = (next_ + 1) % kBuffers;
  return Staged{static_cast<float*>(b.images.get()), static_cast<int32_t*>(b.labels.get()), current_};
}

void CudaBatchStager::doneWith() {
  if (current_ < 0) throw Error("CudaBatchStager::doneWith without a staged batch");
  buffers_[current_].freed.record(ctx_.stream());
}

}  // namespace dtrain
