// BatchStager on a GPU (core/backend/batch_stager.h): a copy stream, two
// device buffers for images and labels, two pinned label buffers, and the
// events ordering the copy stream and the compute stream. Byte batches add
// per buffer the bytes and transforms on the device and pinned transforms;
// their kernel runs on the copy stream, so it overlaps the step before too.
#pragma once
#include <memory>

#include "core/backend/batch_stager.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cuda_handles.h"

namespace dtrain {

class CudaBatchStager final : public BatchStager {
 public:
  CudaBatchStager(CudaContext& ctx, int64_t max_image_floats, int64_t max_labels);
  ~CudaBatchStager() override;

  Staged stage(const float* images, int64_t image_floats, const int32_t* labels, int64_t n) override;
  void useBytes(const ByteFormat& format) override;
  Staged stageBytes(const uint8_t* pixels, const SampleTransform* transforms, const int32_t* labels,
                    int64_t n) override;
  int64_t freeDeviceBytes() const override;
  void doneWith() override;

 private:
  static constexpr int kBuffers = 2;
  struct Buffer {
    std::shared_ptr<void> images, labels;  // device
    std::shared_ptr<void> pinned_labels;
    std::shared_ptr<void> bytes, transforms, pinned_transforms;  // byte batches only
    CudaEvent copied;  // on the copy stream, behind this buffer's copies
    CudaEvent freed;   // on the compute stream, behind the last step reading it
  };
  // A staging's start: the next buffer once its pinned memory may be
  // rewritten, the labels in it, the copy stream behind the step that last
  // read it. Its end: the labels' copy, the events, the buffer handed out.
  Buffer& claim(const int32_t* labels, int64_t n);
  Staged finish(Buffer& b, int64_t n);

  CudaContext& ctx_;
  int64_t max_image_floats_, max_labels_;
  CudaStream copies_;
  Buffer buffers_[kBuffers];
  // Byte batches: their layout (mean and std pointing into norms_), the
  // per-channel mean then std on the device, the cached training split.
  ByteBatchLayout layout_;
  std::shared_ptr<void> norms_, cache_;
  int64_t cache_samples_ = 0;
  int next_ = 0;
  int current_ = -1;  // the buffer last staged
};

}  // namespace dtrain
