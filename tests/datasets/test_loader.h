// Loader options for the dataset tests: a prefetch depth, a shard and a
// thread count, nothing else (no normalisation or augmentation).
#pragma once
#include "datasets/loader_options.h"

namespace dtrain::test {

inline LoaderOptions prefetched(int prefetch, Shard shard = {}, int threads = 1) {
  LoaderOptions o;
  o.prefetch = prefetch;
  o.shard = shard;
  o.threads = threads;
  return o;
}

}  // namespace dtrain::test
