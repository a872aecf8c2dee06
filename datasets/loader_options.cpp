#include "datasets/loader_options.h"

#include <thread>

namespace dtrain {

int resolveLoaderThreads(int configured, const Dataset& dataset) {
  if (configured > 0) return configured;
  if (!dataset.decodesFiles()) return 1;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

LoaderOptions loaderOptionsFor(const DataSection& data, const Dataset& dataset, Split split, uint64_t seed,
                               Shard shard, bool pinned) {
  LoaderOptions o;
  o.prefetch = data.prefetch;
  o.threads = resolveLoaderThreads(data.loader_threads, dataset);
  o.shard = shard;
  o.pinned = pinned;
  o.held = pinned ? 1 : 0;  // pinned buffers feed asynchronous copies to a GPU (BatchStager)
  o.normalisation = Normalisation::fromConfig(data, dataset.sampleShape()[0]);
  if (split == Split::Train) o.augmentation = Augmentation::fromConfig(data);
  o.seed = seed;
  return o;
}

}  // namespace dtrain
