// Copies each training batch to a GPU on a copy stream of its own, into one
// of two device buffers, while the compute stream works on the other: the
// next batch's copy overlaps the current step instead of queueing behind it.
// Events order the two streams: a buffer is refilled only once the compute
// stream has finished the step that read it, and the compute stream reads a
// buffer only once its copy has arrived. Neither waits for the host.
//
// The images must be pinned host memory that stays unchanged until the copy
// has run (the loader holds each batch one next() longer for that, and the
// trainer takes a step's loss, which follows its copy, before asking for the
// batch after next). The labels are copied into pinned buffers of the
// stager's own first.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor/tensor.h"

namespace dtrain {

class BatchStager {
 public:
  struct Staged {
    float* images;    // device memory, valid until the call after next to stage()
    int32_t* labels;  // device memory, likewise
    int buffer;       // which of the stager's buffers: the same two pointers each time
  };

  virtual ~BatchStager() = default;
  // For GPU `device`: buffers for up to `max_image_floats` floats and
  // `max_labels` labels. Throws DeviceError as the CUDA backend does.
  static std::unique_ptr<BatchStager> make(Device device, int64_t max_image_floats, int64_t max_labels);

  // Queues the copies of `image_floats` floats and `n` labels into the next
  // buffer; work queued on the compute stream after this call waits for them.
  virtual Staged stage(const float* images, int64_t image_floats, const int32_t* labels, int64_t n) = 0;
  // Once everything reading the last staged buffer is queued on the compute
  // stream: the buffer may be refilled when the stream gets there.
  virtual void doneWith() = 0;
};

}  // namespace dtrain
