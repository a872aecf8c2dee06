// GlooAlgorithmCache: Gloo algorithm objects kept between calls, so that a
// training loop reducing the same buckets every step does not rebuild them.
//
// Building an algorithm object takes slots from the context in turn, and a
// message for a slot lands in whatever is registered there, so all ranks
// must build the same algorithms at the same calls and reuse them together.
// Below 1 MiB a call copies its data into memory its cached algorithm owns
// ("staged"): the entry is then found by the call's shape alone, the same on
// every rank, and the copy costs less than a round trip. From 1 MiB up the
// algorithm runs in place on the caller's buffer and is found by the buffer's
// address, which is each rank's own (a freed and reallocated buffer may come
// back anywhere), so the ranks first exchange the id of the entry each found
// and reuse it only when all found the same one; otherwise all rebuild.
//
// Memory: at most 32 staged entries (each under 1 MiB of data plus Gloo's
// scratch); in-place entries at most 64, covering at most 1 GiB of messages;
// the least recently used go first.
//
// Every call is collective. Threading: one thread at a time.
#pragma once
#include <gloo/algorithm.h>
#include <gloo/barrier_all_to_all.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/gloo_all_to_all_exchange.h"

namespace dtrain {

class GlooAlgorithmCache {
 public:
  // Builds the algorithm for a call over `memory` (the caller's buffer, or
  // the staging copy the cache owns).
  using Build = std::function<std::unique_ptr<gloo::Algorithm>(void* memory)>;

  // `exchange` agrees on in-place entries and `barrier` follows every build;
  // both belong to the same context as the algorithms, and outlive the cache.
  GlooAlgorithmCache(AllToAllExchange& exchange, gloo::BarrierAllToAll& barrier);

  // Collective: runs the algorithm for `shape` (the call's kind, algorithm
  // and counts) over `bytes` of `data`, building it with `build` when no kept
  // one fits. Returns the memory holding the result: `data` itself, or the
  // staging copy (valid until the next call).
  void* run(const std::string& shape, void* data, int64_t bytes, const Build& build);

 private:
  struct CachedAlgorithm {
    std::string shape;
    void* memory = nullptr;  // what the algorithm reads and writes
    int64_t bytes = 0;
    int64_t id = -1;                             // in-place entries: the id every rank knows it by
    std::vector<double> staging;                 // owns `memory` for staged entries
    std::unique_ptr<gloo::Algorithm> algorithm;  // after staging: destroyed first
  };

  void* runStaged(const std::string& shape, void* data, int64_t bytes, const Build& build);
  void* runInPlace(const std::string& shape, void* data, int64_t bytes, const Build& build);
  // Collective: true when every rank passes the same id and it is not -1.
  bool everyRankHolds(int64_t id);
  // Collective: returns once every rank has built the algorithm just built.
  void awaitEveryRankBuilt();

  AllToAllExchange& exchange_;
  gloo::BarrierAllToAll& barrier_;
  std::list<CachedAlgorithm> staged_;   // most recently used first
  std::list<CachedAlgorithm> inPlace_;  // most recently used first
  int64_t inPlaceBytes_ = 0;
  int64_t nextInPlaceId_ = 0;
};

}  // namespace dtrain
