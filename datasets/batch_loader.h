// BatchLoader: turns a Dataset and a Sampler into batches of float tensors,
// prepared ahead of time on a background thread so the training loop does not
// wait for decoding, augmentation or pixel conversion.
//
// Each sample is get() (or getAugmented() with the training augmentation, its
// draw from (seed, epoch, sample index)) followed by the normalisation; the
// samples of a batch are spread over `threads` threads (a DecodePool: the
// loader thread and threads - 1 helpers), each writing its own rows, so the
// batches are the same for any thread count, prefetch depth, world size or
// resume point. In a byte form (LoaderOptions::form, a GPU run's) each
// sample is its bytes (or only its dataset index) and its augmentation's
// draws instead, which the device turns into the same floats.
//
// Ownership: borrows the Dataset (it must outlive the loader) and copies the
// Sampler. Owns prefetch + 1 batch buffers, allocated once and reused: a
// Batch returned by next() aliases one of them and stays valid only until the
// next call to next() or start(). Copy its contents to keep them longer.
// Memory: those buffers, plus one sample being decoded per thread.
// Threading: one background thread per loader (none when prefetch is 0: then
// next() builds each batch on the calling thread) and threads - 1 helpers.
// All public methods are called from one consumer thread. next() blocks until
// a batch is ready; start() and the destructor cancel outstanding work
// without waiting for it to finish (a sample being decoded completes) and
// never hang.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/tensor/tensor.h"
#include "datasets/dataset.h"
#include "datasets/decode_pool.h"
#include "datasets/loader_options.h"
#include "datasets/sampler.h"

namespace dtrain {

// A batch in a byte form (LoaderOptions::form): what the device converts.
struct ByteBatch {
  const uint8_t* pixels = nullptr;              // Bytes: n samples' bytes (pinned with pinned buffers)
  const SampleTransform* transforms = nullptr;  // n: each sample's source and augmentation
};

struct Batch {
  Tensor images;                // Floats: [n,C,H,W], 64-byte aligned: pixels in [0,1], then normalised
  std::vector<int32_t> labels;  // n labels (n x T for token windows: Dataset::labelsPerSample)
  int64_t size = 0;             // n
  int64_t global_size = 0;      // samples of the global batch (all ranks) it is a slice of
  int64_t global_offset = 0;    // row of the global batch where this slice starts
  // The global batch's labels that count in the loss (global_size x labels
  // per sample, less a token window's padding): what its mean is taken over.
  int64_t global_labels = 0;
  BatchForm form = BatchForm::Floats;
  ByteBatch bytes;  // Bytes, Indices (images is then empty)
};

// The loss gradient's factor for a model predicting each position of a
// sequence: `per_sample` (1 / the global batch's samples, times fp16's loss
// scale) made the mean over the global batch's counted labels instead (its
// windows' positions less the padding); 0 when none counts.
inline float perLabelScale(const Batch& batch, float per_sample) {
  return batch.global_labels > 0
             ? per_sample * static_cast<float>(batch.global_size) / static_cast<float>(batch.global_labels)
             : 0.0f;
}

class BatchLoader {
 public:
  // batch_size >= 1 is the global batch (all ranks together); each batch
  // handed out is options.shard's slice of it (possibly empty at an epoch's
  // end). See LoaderOptions for the rest (loaderOptionsFor builds them from
  // a job). Throws Error for invalid arguments or a sampler that does not
  // match the dataset's size, ConfigError for a normalisation of another
  // channel count. Nothing is loaded until start().
  BatchLoader(const Dataset& data, const Sampler& sampler, int64_t batch_size, LoaderOptions options = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // (Re)starts at `epoch`, skipping the first `position` samples of the
  // epoch's order (resume from a checkpoint's position(), which counts
  // samples of all ranks, so it holds for any world size).
  // May be called at any time, also mid-epoch: batches not yet handed out are
  // dropped. Throws Error when position is outside [0, samplesPerEpoch()].
  void start(int64_t epoch, int64_t position = 0);

  // The next batch of this epoch into `out` (the last one may be smaller);
  // false at the end of the epoch. Rethrows an exception raised while
  // preparing a batch (after handing out the batches before it), again on
  // every call until start(). Throws Error if start() was never called.
  bool next(Batch& out);

  // Global batches per epoch, counting a partial last batch (the same on
  // every rank).
  int64_t batchesPerEpoch() const;
  // Samples of the current epoch handed out so far by next() to all ranks
  // together, including the `position` given to start(): store it to resume
  // exactly here.
  int64_t position() const { return position_; }
  // Samples per epoch, all ranks together.
  int64_t samplesPerEpoch() const { return sampler_.size(); }
  int64_t batchSize() const { return batch_size_; }
  // Threads preparing samples (LoaderOptions::threads).
  int threads() const { return pool_.threads(); }

 private:
  struct Slot {
    Tensor full;                              // [capacity,C,H,W], allocated on first use
    Batch batch;                              // what next() hands out: a view of `full` (or of the two below)
    std::shared_ptr<void> pixels;             // Bytes: capacity samples, allocated on first use
    std::vector<SampleTransform> transforms;  // byte forms: capacity entries
  };

  void run();
  bool canProduce() const;
  // Fills `slot` with this shard's slice of the global batch order[begin,
  // begin+n) of `epoch`. False when cancelled midway.
  bool fill(Slot& slot, const std::vector<int64_t>& order, int64_t begin, int64_t n, int64_t epoch,
            uint64_t generation);
  // fill() for the byte forms: n samples from `indices`.
  bool fillBytes(Slot& slot, const int64_t* indices, int64_t n, int64_t epoch, uint64_t generation);
  // One sample of `epoch`, augmented and normalised, into `out`; its label.
  int32_t prepare(int64_t index, int64_t epoch, float* out) const;
  bool nextSynchronous(Batch& out);

  const Dataset& data_;
  const Sampler sampler_;
  const int64_t batch_size_;
  const int prefetch_;
  const Shard shard_;
  const int64_t sample_numel_;
  const int64_t labels_per_sample_;  // Dataset::labelsPerSample
  const int64_t capacity_;           // rows per buffer: the largest slice, or fewer for a small dataset
  const bool pinned_;
  const bool low_priority_;
  const Normalisation normalisation_;
  const Augmentation augmentation_;
  const uint64_t seed_;
  const BatchForm form_;
  const ByteImages* bytes_;  // the dataset's, for the byte forms
  std::vector<Slot> slots_;
  // Used by the loader thread (or, without one, the consumer); destroyed
  // after the loader thread has been joined.
  DecodePool pool_;

  std::mutex mu_;
  std::condition_variable producer_cv_;  // work to do, or stop
  std::condition_variable consumer_cv_;  // batch ready, error, or end of epoch
  // Guarded by mu_. A start() bumps generation_ so batches prepared for an
  // earlier start are recognised and dropped.
  uint64_t generation_ = 0;  // 0: never started
  int64_t epoch_ = 0;
  int64_t start_position_ = 0;
  int64_t total_batches_ = 0;  // in this generation
  int64_t produced_ = 0;       // batches published by the producer
  int64_t consumed_ = 0;       // batches handed out by next()
  std::exception_ptr error_;
  bool stop_ = false;
  // Read by the producer between samples, so cancellation does not wait for a
  // whole batch to be converted.
  std::atomic<uint64_t> live_generation_{0};
  std::atomic<bool> stopping_{false};

  // Consumer-thread state.
  int64_t position_ = 0;
  std::vector<int64_t> sync_order_;  // prefetch 0 only
  int64_t sync_order_epoch_ = -1;

  std::thread thread_;  // last: started once everything above is initialised
};

}  // namespace dtrain
