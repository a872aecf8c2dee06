// How a BatchLoader prepares batches: prefetch depth, threads, where its
// buffers live, which slice of each global batch it takes, and the
// per-sample normalisation and augmentation. loaderOptionsFor() builds them
// from a job's [data] section, so the trainer, evaluation and `dtrain bench
// loader` prepare data the same way.
// Ownership: plain values. Thread-safety: immutable once built.
#pragma once
#include <cstdint>

#include "core/backend/byte_batch.h"
#include "core/config/job_config.h"
#include "datasets/augmentation.h"
#include "datasets/dataset.h"
#include "datasets/normalisation.h"

namespace dtrain {

// Which slice of every global batch this process takes: rank r of `world`
// gets rows [r*n/world, (r+1)*n/world) of each batch of n samples.
struct Shard {
  int rank = 0;
  int world = 1;
};

// What a batch holds. Floats: the images as the model reads them
// (Batch::images). For a GPU to make those itself (core/backend/byte_batch.h),
// from datasets held as bytes without the resized crop (byteBatchesRefusal):
// Bytes, the samples' bytes and each sample's augmentation (Batch::bytes);
// Indices, the augmentation alone, its sources dataset indices, for a device
// holding the whole training split ([data] device_cache_mb).
enum class BatchForm { Floats, Bytes, Indices };

struct LoaderOptions {
  int prefetch = 2;  // batches prepared ahead on the loader thread (0: no thread, next() prepares each)
  int threads = 1;   // threads preparing a batch's samples, the loader thread included (>= 1)
  Shard shard;
  // Page-locked buffers (Tensor::pinned), so a GPU copies batches from them
  // asynchronously while the loader fills the next ones.
  bool pinned = false;
  // Batches the consumer still reads after asking for the next one: a batch
  // stays unchanged until `held` + 1 further calls to next() (a GPU's copy of
  // it may still be queued when the step after it asks for its batch).
  // Counted from start(): batches from before a start() are never held.
  int held = 0;
  // The loader's threads run below normal priority, so they take the gaps the
  // compute threads leave instead of preempting them (batch_loader.cpp).
  // `dtrain bench loader`, which measures the loader alone, turns this off.
  bool low_priority = true;
  Normalisation normalisation;  // applied to every sample (after augmentation)
  Augmentation augmentation;    // training only
  uint64_t seed = 0;            // with the epoch and the sample index, drives the augmentation
  // Byte forms leave the normalisation and augmentation to the device: the
  // batch carries the draws, the consumer applies `normalisation`.
  BatchForm form = BatchForm::Floats;
};

// [data] loader_threads resolved: a positive value as given; 0 is one thread
// per core for datasets that decode files on every read (image_folder) and one
// for datasets held in memory, whose samples are copies that cost next to nothing.
int resolveLoaderThreads(int configured, const Dataset& dataset);

// The options for `split` of the job's data: prefetch, threads and
// normalisation from [data]; the augment_* keys for the training split only.
// Throws ConfigError when mean/std do not fit the dataset's channels.
LoaderOptions loaderOptionsFor(const DataSection& data, const Dataset& dataset, Split split, uint64_t seed,
                               Shard shard, bool pinned);

}  // namespace dtrain
