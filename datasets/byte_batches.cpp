#include "datasets/byte_batches.h"

#include <cstdio>

#include "datasets/byte_images.h"

namespace dtrain {

namespace {

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

std::string byteBatchesRefusal(const Dataset& dataset, const Augmentation& augmentation) {
  if (!dataset.byteImages()) return "the dataset's images are decoded from files into floats";
  if (dataset.sampleShape().rank() != 3) return "the samples are not [C,H,W] images";
  if (augmentation.options().resized_crop) return "augment_resized_crop runs on the CPU's floats";
  return "";
}

SampleTransform sampleTransformOf(const Augmentation& augmentation, uint64_t draw, int64_t source) {
  SampleTransform t;
  t.source = source;
  const int64_t padding = augmentation.options().crop_padding;
  if (padding > 0) {
    const auto [dy, dx] = augmentation.paddedCropOffset(draw);
    t.shift_y = static_cast<int32_t>(padding - dy);
    t.shift_x = static_cast<int32_t>(padding - dx);
  }
  t.flip = augmentation.flips(draw) ? 1 : 0;
  return t;
}

int64_t deviceCacheBudget(int64_t configured_mb, int64_t free_device_bytes) {
  if (configured_mb < 0) return free_device_bytes > 0 ? free_device_bytes / kDeviceCacheShare : 0;
  return configured_mb << 20;
}

GpuBatchPlan planGpuBatches(const DataSection& data, const Dataset& train, const Augmentation& augmentation,
                            int64_t free_device_bytes) {
  const std::string refusal = byteBatchesRefusal(train, augmentation);
  if (!refusal.empty())
    return {BatchForm::Floats, "training batches cross to the GPU as floats (" + refusal + ")"};
  const ByteImages& images = *train.byteImages();
  const int64_t bytes = images.size() * images.sampleBytes();
  const int64_t budget = deviceCacheBudget(data.device_cache_mb, free_device_bytes);
  if (bytes <= budget)
    return {BatchForm::Indices, "the training split (" + megabytes(bytes) +
                                    " of bytes) is kept on the GPU: each step sends its sample indices"};
  const std::string why = data.device_cache_mb == 0
                              ? "device_cache_mb = 0"
                              : megabytes(bytes) + " exceed the device cache's " + megabytes(budget);
  return {BatchForm::Bytes, "training batches cross to the GPU as bytes (" + why + ")"};
}

}  // namespace dtrain
