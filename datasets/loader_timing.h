// The loader's throughput on its own (no model): what `dtrain bench loader`
// reports, the bar an input pipeline must clear to keep a model fed.
// Thread-safety: drives the loader from the calling thread; blocks for as
// long as the batches take.
#pragma once
#include <cstdint>

#include "datasets/batch_loader.h"

namespace dtrain {

struct LoaderThroughput {
  int64_t batches = 0;  // timed global batches
  int64_t images = 0;   // samples in them
  double seconds = 0;
  double imagesPerSecond() const { return seconds > 0 ? static_cast<double>(images) / seconds : 0.0; }
};

// Starts `loader` at epoch 0, takes `warmup` batches untimed (threads
// started, buffers allocated, files in the page cache as in a later epoch),
// then times `batches` more, going on into the next epochs when one ends as
// training does. Rethrows the loader's errors.
LoaderThroughput timeLoader(BatchLoader& loader, int64_t warmup, int64_t batches);

}  // namespace dtrain
