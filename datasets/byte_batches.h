// Byte batches for a GPU run: whether a dataset's training batches can cross
// to the device as bytes (a quarter of the floats) and be normalised and
// augmented there, each sample's transform as the float path draws it, and
// whether the whole training split is kept on the device instead, so each
// step sends only the batch's sample indices ([data] device_cache_mb).
// Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <string>

#include "core/backend/byte_batch.h"
#include "core/config/job_config.h"
#include "datasets/augmentation.h"
#include "datasets/dataset.h"
#include "datasets/loader_options.h"

namespace dtrain {

// "" when `dataset`'s batches can cross as bytes with `augmentation`, else
// why not, as a clause for the log: the dataset decodes files (its floats
// come from the decoder), or the resized crop is on (it stays on the CPU's
// floats: its bilinear weights are not written for the device).
std::string byteBatchesRefusal(const Dataset& dataset, const Augmentation& augmentation);

// The transform of a sample whose draw is `draw` (Augmentation::sampleDraw;
// anything without augmentation) and whose bytes are at `source`: the padded
// crop's move and the flip that Augmentation::applyAfterResizedCrop applies.
SampleTransform sampleTransformOf(const Augmentation& augmentation, uint64_t draw, int64_t source);

// The default budget's share of the device's free memory when the run starts:
// a quarter, so the model's parameters, activations, library workspaces and
// the allocator's cache keep the other three.
constexpr int64_t kDeviceCacheShare = 4;

// [data] device_cache_mb in bytes: -1 (the default) is a kDeviceCacheShare-th
// of `free_device_bytes`, 0 is no cache, else that many MiB.
int64_t deviceCacheBudget(int64_t configured_mb, int64_t free_device_bytes);

// How a GPU replica's training batches cross, and one line saying so.
struct GpuBatchPlan {
  BatchForm form = BatchForm::Floats;
  std::string description;
};

// Floats when byteBatchesRefusal refuses; else Indices when the training
// split's bytes fit deviceCacheBudget, else Bytes.
GpuBatchPlan planGpuBatches(const DataSection& data, const Dataset& train, const Augmentation& augmentation,
                            int64_t free_device_bytes);

}  // namespace dtrain
