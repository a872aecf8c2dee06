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
//
// Byte batches (useBytes, stageBytes): the images cross as bytes, a quarter
// of the floats, with each sample's augmentation (SampleTransform), and a
// kernel on the copy stream makes the float batch (core/backend/byte_batch.h).
// With a cache, the whole training split's bytes are copied to the device once
// and each batch crosses as sample indices only, gathered on the device.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend/byte_batch.h"
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

  // How byte batches become floats.
  struct ByteFormat {
    int64_t channels = 0, height = 0, width = 0;  // channels * height * width <= the buffers' floats
    std::vector<float> mean, std;                 // one per channel; empty: not normalised
    // The training split's bytes, `cache_samples` samples one after another,
    // copied to the device by useBytes and gathered from there by the
    // transforms' sources (dataset indices). Null: each batch's bytes cross.
    const uint8_t* cache = nullptr;
    int64_t cache_samples = 0;
  };
  // Once, before stageBytes: allocates the byte buffers and copies the cache
  // (waiting until it is there). Throws DeviceError when memory runs out.
  virtual void useBytes(const ByteFormat& format) = 0;
  // Queues the copies of n samples' transforms and labels, and of their bytes
  // (`pixels`, pinned, sample after sample; null with a cache), then the
  // kernel making their floats into the next buffer; work queued on the
  // compute stream after this call waits for them. `pixels` must stay
  // unchanged as `images` for stage().
  virtual Staged stageBytes(const uint8_t* pixels, const SampleTransform* transforms, const int32_t* labels,
                            int64_t n) = 0;
  // The device's free memory now, in bytes (the cache's default budget is a share of it).
  virtual int64_t freeDeviceBytes() const = 0;
  // Once everything reading the last staged buffer is queued on the compute
  // stream: the buffer may be refilled when the stream gets there.
  virtual void doneWith() = 0;
};

}  // namespace dtrain
