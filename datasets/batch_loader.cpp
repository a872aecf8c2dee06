#include "datasets/batch_loader.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/backend/device_memory.h"
#include "core/errors.h"
#include "core/util/worker_pool.h"
#include "datasets/byte_batches.h"
#include "datasets/byte_images.h"

namespace dtrain {

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The pool's thread count, checked before the pool starts any thread.
int checkedThreads(int threads) {
  if (threads < 1) throw Error("BatchLoader: threads must be >= 1, got " + std::to_string(threads));
  return threads;
}
}  // namespace

BatchLoader::BatchLoader(const Dataset& data, const Sampler& sampler, int64_t batch_size,
                         LoaderOptions options)
    : data_(data),
      sampler_(sampler),
      batch_size_(batch_size),
      prefetch_(options.prefetch),
      shard_(options.shard),
      sample_numel_(data.sampleShape().numel()),
      labels_per_sample_(data.labelsPerSample()),
      capacity_(std::max<int64_t>(
          1, shard_.world >= 1 ? ceilDiv(std::min(batch_size, sampler.size()), shard_.world) : 1)),
      pinned_(options.pinned),
      low_priority_(options.low_priority),
      normalisation_(std::move(options.normalisation)),
      augmentation_(options.augmentation),
      seed_(options.seed),
      form_(options.form),
      bytes_(data.byteImages()),
      pool_(checkedThreads(options.threads), options.low_priority) {
  if (shard_.world < 1 || shard_.rank < 0 || shard_.rank >= shard_.world)
    throw Error("BatchLoader: rank " + std::to_string(shard_.rank) + " is outside a world of " +
                std::to_string(shard_.world));
  if (batch_size < 1) throw Error("BatchLoader: batch size must be >= 1, got " + std::to_string(batch_size));
  if (prefetch_ < 0) throw Error("BatchLoader: prefetch must be >= 0, got " + std::to_string(prefetch_));
  if (sampler.datasetSize() != data.size())
    throw Error("BatchLoader: the sampler covers " + std::to_string(sampler.datasetSize()) +
                " samples but the dataset has " + std::to_string(data.size()));
  const Shape shape = data.sampleShape();
  if (normalisation_.active() && (shape.rank() != 3 || normalisation_.channels() != shape[0]))
    throw ConfigError("[data] mean/std are for " + std::to_string(normalisation_.channels()) +
                      " channels but the samples are " + shape.str() +
                      "; give one value, or one per channel");
  if (augmentation_.active() && shape.rank() != 3)
    throw ConfigError("[data] augment_* keys need [C,H,W] image samples, not " + shape.str());
  if (form_ != BatchForm::Floats) {
    const std::string refusal = byteBatchesRefusal(data, augmentation_);
    if (!refusal.empty()) throw Error("BatchLoader: no byte batches: " + refusal);
  }
  // The consumer holds one buffer while the thread fills up to `prefetch`.
  if (options.held < 0) throw Error("BatchLoader: held must be >= 0, got " + std::to_string(options.held));
  // prefetch being prepared or ready, one handed out, `held` still read by the consumer.
  slots_.resize(static_cast<size_t>(prefetch_) + 1 + static_cast<size_t>(options.held));
  if (prefetch_ > 0) thread_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true);
  }
  producer_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t BatchLoader::batchesPerEpoch() const { return ceilDiv(sampler_.size(), batch_size_); }

void BatchLoader::start(int64_t epoch, int64_t position) {
  const int64_t share = sampler_.size();
  if (epoch < 0) throw Error("BatchLoader: epoch " + std::to_string(epoch) + " is negative");
  if (position < 0 || position > share)
    throw Error("BatchLoader: resume position " + std::to_string(position) + " is outside this epoch's " +
                std::to_string(share) + " samples (was the checkpoint written for another dataset?)");
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    live_generation_.store(generation_);
    epoch_ = epoch;
    start_position_ = position;
    total_batches_ = ceilDiv(share - position, batch_size_);
    produced_ = 0;
    consumed_ = 0;
    error_ = nullptr;
  }
  position_ = position;
  producer_cv_.notify_one();
}

bool BatchLoader::canProduce() const {
  return generation_ != 0 && !error_ && produced_ < total_batches_ && produced_ - consumed_ < prefetch_;
}

int32_t BatchLoader::prepare(int64_t index, int64_t epoch, float* out) const {
  const int32_t label =
      augmentation_.active()
          ? data_.getAugmented(index, augmentation_, Augmentation::sampleDraw(seed_, epoch, index), out)
          : data_.get(index, out);
  if (normalisation_.active()) normalisation_.apply(out, sample_numel_ / normalisation_.channels());
  return label;
}

bool BatchLoader::fill(Slot& slot, const std::vector<int64_t>& order, int64_t begin, int64_t n, int64_t epoch,
                       uint64_t generation) {
  if (!slot.full.data() && form_ == BatchForm::Floats) {
    const Shape shape = data_.sampleShape().withBatch(capacity_);
    slot.full = pinned_ ? Tensor::pinned(shape) : Tensor::empty(shape);
  }
  slot.batch.global_size = n;
  slot.batch.global_labels = n * labels_per_sample_;
  if (labels_per_sample_ > 1) {  // less the padding, of the whole global batch: every rank's
    slot.batch.global_labels = 0;
    for (int64_t i = 0; i < n; ++i) slot.batch.global_labels += data_.countedLabels(order[begin + i]);
  }
  // This shard's rows of the global batch, split as the compute threads split theirs.
  const auto [lo, hi] = WorkerPool::split(n, shard_.world, shard_.rank);
  slot.batch.global_offset = lo;
  begin += lo;
  n = hi - lo;
  if (form_ != BatchForm::Floats) return fillBytes(slot, order.data() + begin, n, epoch, generation);
  // Re-view only when the batch size changes (the partial last batch), so a
  // steady state allocates nothing.
  if (slot.batch.size != n || !slot.batch.images.data()) {
    slot.batch.images = n == capacity_ ? slot.full : slot.full.narrow(0, n);
    slot.batch.labels.resize(static_cast<size_t>(n * labels_per_sample_));
    slot.batch.size = n;
  }
  float* dst = slot.full.data();
  int32_t* labels = slot.batch.labels.data();
  const int64_t* indices = order.data() + begin;
  // Every sample writes its own row, so which thread takes it does not matter.
  return pool_.run(n, [&](int64_t i) {
    if (stopping_.load(std::memory_order_relaxed) ||
        live_generation_.load(std::memory_order_relaxed) != generation)
      return false;
    if (labels_per_sample_ == 1)
      labels[i] = prepare(indices[i], epoch, dst + i * sample_numel_);
    else  // token windows: neither augmented nor normalised (checked at construction)
      data_.getWithLabels(indices[i], dst + i * sample_numel_, labels + i * labels_per_sample_);
    return true;
  });
}

bool BatchLoader::fillBytes(Slot& slot, const int64_t* indices, int64_t n, int64_t epoch,
                            uint64_t generation) {
  const int64_t sample = bytes_->sampleBytes();
  if (form_ == BatchForm::Bytes && !slot.pixels) {
    const size_t size = static_cast<size_t>(capacity_ * sample);
    slot.pixels = pinned_ ? allocatePinnedHost(size) : allocateHost(size);
  }
  slot.transforms.resize(static_cast<size_t>(capacity_));
  slot.batch.form = form_;
  slot.batch.images = Tensor();
  slot.batch.labels.resize(static_cast<size_t>(n));
  slot.batch.size = n;
  uint8_t* pixels = static_cast<uint8_t*>(slot.pixels.get());
  SampleTransform* transforms = slot.transforms.data();
  slot.batch.bytes = ByteBatch{pixels, transforms};
  int32_t* labels = slot.batch.labels.data();
  return pool_.run(n, [&](int64_t i) {
    if (stopping_.load(std::memory_order_relaxed) ||
        live_generation_.load(std::memory_order_relaxed) != generation)
      return false;
    const int64_t index = indices[i];
    const uint64_t draw = augmentation_.active() ? Augmentation::sampleDraw(seed_, epoch, index) : 0;
    // The source: the sample's row here, or its index into the device's copy of the split.
    transforms[i] = sampleTransformOf(augmentation_, draw, pixels ? i : index);
    if (pixels)
      std::memcpy(pixels + i * sample, bytes_->pixels() + index * sample, static_cast<size_t>(sample));
    labels[i] = bytes_->label(index);
    return true;
  });
}

void BatchLoader::run() {
  // Below the compute threads' priority: preparing a batch takes a fraction of
  // a step, and when it preempts one compute thread the other waits for it.
  // At a lower priority it runs in the gaps (and at full speed when the
  // trainer is waiting for it, since the compute threads then idle).
  if (low_priority_) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    producer_cv_.wait(lock, [this] { return stop_ || canProduce(); });
    if (stop_) return;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const int64_t begin = start_position_ + produced_ * batch_size_;
    const int64_t n = std::min(batch_size_, sampler_.size() - begin);
    // Free: neither handed out nor published (see canProduce), so the
    // consumer does not touch it while it is filled without the lock.
    Slot& slot = slots_[static_cast<size_t>(produced_ % static_cast<int64_t>(slots_.size()))];
    lock.unlock();
    bool complete = false;
    std::exception_ptr error;
    try {
      if (epoch != order_epoch) {
        order_epoch = -1;  // stays invalid if epochOrder throws
        order = sampler_.epochOrder(epoch);
        order_epoch = epoch;
      }
      complete = fill(slot, order, begin, n, epoch, generation);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // restarted meanwhile: drop it
    if (error) {
      error_ = error;
    } else if (complete) {
      ++produced_;
    } else {
      continue;
    }
    consumer_cv_.notify_one();
  }
}

bool BatchLoader::next(Batch& out) {
  if (prefetch_ == 0) return nextSynchronous(out);
  std::unique_lock<std::mutex> lock(mu_);
  if (generation_ == 0) throw Error("BatchLoader: next() called before start()");
  consumer_cv_.wait(lock, [this] { return produced_ > consumed_ || error_ || consumed_ == total_batches_; });
  if (produced_ > consumed_) {
    const Slot& slot = slots_[static_cast<size_t>(consumed_ % static_cast<int64_t>(slots_.size()))];
    out = slot.batch;  // reuses out's vectors: no allocation in steady state
    ++consumed_;
    position_ += slot.batch.global_size;
    lock.unlock();
    // Handing out this batch frees the one handed out before it.
    producer_cv_.notify_one();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

bool BatchLoader::nextSynchronous(Batch& out) {
  if (generation_ == 0) throw Error("BatchLoader: next() called before start()");
  if (consumed_ == total_batches_) return false;
  if (sync_order_epoch_ != epoch_) {
    sync_order_epoch_ = -1;
    sync_order_ = sampler_.epochOrder(epoch_);
    sync_order_epoch_ = epoch_;
  }
  const int64_t begin = start_position_ + consumed_ * batch_size_;
  const int64_t n = std::min(batch_size_, sampler_.size() - begin);
  Slot& slot = slots_[static_cast<size_t>(consumed_ % static_cast<int64_t>(slots_.size()))];
  fill(slot, sync_order_, begin, n, epoch_, generation_);
  out = slot.batch;
  ++consumed_;
  position_ += slot.batch.global_size;
  return true;
}

}  // namespace dtrain
