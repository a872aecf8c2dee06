#include "core/backend/cuda/cuda_batch_stager.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/backend/cuda/byte_batch_kernels.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/errors.h"

namespace dtrain {

namespace {

std::shared_ptr<void> pinnedOrThrow(size_t bytes, const char* what) {
  std::shared_ptr<void> p = cudaPinnedHost(bytes);
  if (!p) throw DeviceError(std::string("CUDA: could not allocate pinned host memory for ") + what);
  return p;
}

}  // namespace

CudaBatchStager::CudaBatchStager(CudaContext& ctx, int64_t max_image_floats, int64_t max_labels)
    : ctx_(ctx), max_image_floats_(max_image_floats), max_labels_(max_labels) {
  for (Buffer& b : buffers_) {
    b.images = ctx_.allocate(static_cast<size_t>(max_image_floats) * sizeof(float));
    b.labels = ctx_.allocate(static_cast<size_t>(max_labels) * sizeof(int32_t));
    b.pinned_labels = pinnedOrThrow(static_cast<size_t>(max_labels) * sizeof(int32_t), "the labels");
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

void CudaBatchStager::useBytes(const ByteFormat& f) {
  const int64_t sample = f.channels * f.height * f.width;
  if (sample <= 0 || sample * max_labels_ > max_image_floats_)
    throw Error("CudaBatchStager: byte samples of " + std::to_string(sample) +
                " values do not fit its buffers (" + std::to_string(max_image_floats_) + " floats for " +
                std::to_string(max_labels_) + " samples)");
  const bool normalised = !f.mean.empty();
  if (normalised && (static_cast<int64_t>(f.mean.size()) != f.channels || f.std.size() != f.mean.size()))
    throw Error("CudaBatchStager: a mean and std for each of the " + std::to_string(f.channels) +
                " channels");
  copies_.synchronize();  // nothing staged before may still read what is replaced
  layout_ = ByteBatchLayout{f.channels, f.height, f.width, nullptr, nullptr};
  norms_.reset();
  if (normalised) {
    std::vector<float> both(f.mean);
    both.insert(both.end(), f.std.begin(), f.std.end());
    norms_ = ctx_.allocate(both.size() * sizeof(float));
    checkCuda(cudaMemcpyAsync(norms_.get(), both.data(), both.size() * sizeof(float), cudaMemcpyHostToDevice,
                              copies_.get()),
              "copy the normalisation's mean and std to the GPU");
    layout_.mean = static_cast<const float*>(norms_.get());
    layout_.std = layout_.mean + f.channels;
  }
  cache_.reset();
  cache_samples_ = 0;
  if (f.cache) {
    const size_t bytes = static_cast<size_t>(f.cache_samples) * static_cast<size_t>(sample);
    cache_ = ctx_.allocate(bytes);
    checkCuda(cudaMemcpyAsync(cache_.get(), f.cache, bytes, cudaMemcpyHostToDevice, copies_.get()),
              "copy the training data to the GPU ([data] device_cache_mb)");
    cache_samples_ = f.cache_samples;
  }
  for (Buffer& b : buffers_) {
    const size_t transforms = static_cast<size_t>(max_labels_) * sizeof(SampleTransform);
    b.bytes = f.cache ? nullptr : ctx_.allocate(static_cast<size_t>(max_labels_ * sample));
    b.transforms = ctx_.allocate(transforms);
    b.pinned_transforms = pinnedOrThrow(transforms, "the batches' augmentation");
  }
  copies_.synchronize();  // `both` and the caller's cache bytes are read by now
}

BatchStager::Staged CudaBatchStager::stage(const float* images, int64_t image_floats, const int32_t* labels,
                                           int64_t n) {
  if (image_floats > max_image_floats_ || n > max_labels_)
    throw Error("CudaBatchStager: a batch of " + std::to_string(n) + " samples (" +
                std::to_string(image_floats) + " floats) exceeds its buffers (" +
                std::to_string(max_labels_) + " samples, " + std::to_string(max_image_floats_) + " floats)");
  Buffer& b = claim(labels, n);
  checkCuda(cudaMemcpyAsync(b.images.get(), images, static_cast<size_t>(image_floats) * sizeof(float),
                            cudaMemcpyHostToDevice, copies_.get()),
            "copy a batch's images to the GPU");
  return finish(b, n);
}

CudaBatchStager::Buffer& CudaBatchStager::claim(const int32_t* labels, int64_t n) {
  Buffer& b = buffers_[next_];
  // The pinned labels are rewritten by the host: their last copy must have
  // run. It has, two steps on, unless the device is that far behind, with
  // the steps since queued behind that copy: the host is held back, the
  // device kept busy.
  if (!b.copied.done()) b.copied.waitAhead();
  std::memcpy(b.pinned_labels.get(), labels, static_cast<size_t>(n) * sizeof(int32_t));
  b.freed.makeWait(copies_);  // the step before last has finished reading this buffer
  return b;
}

BatchStager::Staged CudaBatchStager::finish(Buffer& b, int64_t n) {
  checkCuda(cudaMemcpyAsync(b.labels.get(), b.pinned_labels.get(), static_cast<size_t>(n) * sizeof(int32_t),
                            cudaMemcpyHostToDevice, copies_.get()),
            "copy a batch's labels to the GPU");
  b.copied.record(copies_);
  b.copied.makeWait(ctx_.stream());  // the step reads the batch only once it is there
  current_ = next_;
  next_ = (next_ + 1) % kBuffers;
  return Staged{static_cast<float*>(b.images.get()), static_cast<int32_t*>(b.labels.get()), current_};
}

BatchStager::Staged CudaBatchStager::stageBytes(const uint8_t* pixels, const SampleTransform* transforms,
                                                const int32_t* labels, int64_t n) {
  if (layout_.channels == 0) throw Error("CudaBatchStager::stageBytes before useBytes");
  if (n > max_labels_)
    throw Error("CudaBatchStager: a batch of " + std::to_string(n) + " samples exceeds its buffers (" +
                std::to_string(max_labels_) + " samples)");
  if ((pixels == nullptr) != static_cast<bool>(cache_))
    throw Error(cache_ ? "CudaBatchStager: the training data is on the GPU; stage sample indices, not bytes"
                       : "CudaBatchStager: a byte batch without its bytes, and no training data on the GPU");
  if (cache_)
    for (int64_t i = 0; i < n; ++i)  // a bad index would read outside the cache on the device
      if (transforms[i].source < 0 || transforms[i].source >= cache_samples_)
        throw Error("CudaBatchStager: sample index " + std::to_string(transforms[i].source) +
                    " is outside the " + std::to_string(cache_samples_) + " samples on the GPU");
  Buffer& b = claim(labels, n);  // its pinned transforms' last copy has run too
  std::memcpy(b.pinned_transforms.get(), transforms, static_cast<size_t>(n) * sizeof(SampleTransform));
  const int64_t sample = layout_.sampleBytes();
  if (pixels)
    checkCuda(cudaMemcpyAsync(b.bytes.get(), pixels, static_cast<size_t>(n * sample), cudaMemcpyHostToDevice,
                              copies_.get()),
              "copy a batch's image bytes to the GPU");
  checkCuda(cudaMemcpyAsync(b.transforms.get(), b.pinned_transforms.get(),
                            static_cast<size_t>(n) * sizeof(SampleTransform), cudaMemcpyHostToDevice,
                            copies_.get()),
            "copy a batch's augmentation to the GPU");
  const uint8_t* source = static_cast<const uint8_t*>(pixels ? b.bytes.get() : cache_.get());
  cuda::byteBatchToFloats(source, static_cast<const SampleTransform*>(b.transforms.get()), n, layout_,
                          static_cast<float*>(b.images.get()), copies_.get());
  checkCuda(cudaGetLastError(), "launch the conversion of a byte batch to floats");
  return finish(b, n);
}

int64_t CudaBatchStager::freeDeviceBytes() const {
  size_t free = 0, total = 0;
  checkCuda(cudaSetDevice(ctx_.device()), "select the GPU");
  checkCuda(cudaMemGetInfo(&free, &total), "ask the GPU for its free memory");
  return static_cast<int64_t>(free);
}

void CudaBatchStager::doneWith() {
  if (current_ < 0) throw Error("CudaBatchStager::doneWith without a staged batch");
  buffers_[current_].freed.record(ctx_.stream());
}

}  // namespace dtrain
