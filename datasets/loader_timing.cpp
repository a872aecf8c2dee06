#include "datasets/loader_timing.h"

#include <chrono>

#include "core/errors.h"

namespace dtrain {

namespace {

// The next batch, starting the next epoch when this one is over.
void nextBatch(BatchLoader& loader, Batch& batch, int64_t& epoch) {
  while (!loader.next(batch)) {
    if (loader.samplesPerEpoch() == 0) throw DataError("the dataset has no samples to load");
    loader.start(++epoch);
  }
}

}  // namespace

LoaderThroughput timeLoader(BatchLoader& loader, int64_t warmup, int64_t batches) {
  int64_t epoch = 0;
  loader.start(epoch);
  Batch batch;
  for (int64_t i = 0; i < warmup; ++i) nextBatch(loader, batch, epoch);
  LoaderThroughput t;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < batches; ++i) {
    nextBatch(loader, batch, epoch);
    t.images += batch.global_size;
    ++t.batches;
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

}  // namespace dtrain
