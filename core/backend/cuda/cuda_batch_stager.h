// BatchStager on a GPU (core/backend/batch_stager.h): a copy stream, two
// device buffers for images and labels, two pinned label buffers, and the
// events ordering the copy stream and the compute stream.
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
  void doneWith() override;

 private:
  static constexpr int kBuffers = 2;
  struct Buffer {
    std::shared_ptr<void> images, labels;  // device
    std::shared_ptr<void> pinned_labels;
    CudaEvent copied;  // on the copy stream, behind this buffer's copies
    CudaEvent freed;   // on the compute stream, behind the last step reading it
  };

  CudaContext& ctx_;
  int64_t max_image_floats_, max_labels_;
  CudaStream copies_;
  Buffer buffers_[kBuffers];
  int next_ = 0;
  int current_ = -1;  // the buffer last staged
};

}  // namespace dtrain
