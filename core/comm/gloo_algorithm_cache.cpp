#include "core/comm/gloo_algorithm_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace dtrain {

namespace {

// From this size up an algorithm runs in place on the caller's buffer (see
// the header for why the two kinds of entry exist).
constexpr int64_t kInPlaceFromBytes = 1 << 20;
// Bounds on the cache: staged entries by count (each is under 1 MiB of data
// plus Gloo's scratch), in-place entries by count and by the bytes they cover.
constexpr size_t kMaxStagedEntries = 32;
constexpr size_t kMaxInPlaceEntries = 64;
constexpr int64_t kMaxInPlaceBytes = int64_t(1) << 30;

}  // namespace

GlooAlgorithmCache::GlooAlgorithmCache(AllToAllExchange& exchange, gloo::BarrierAllToAll& barrier)
    : exchange_(exchange), barrier_(barrier) {}

void* GlooAlgorithmCache::run(const std::string& shape, void* data, int64_t bytes, const Build& build) {
  return bytes < kInPlaceFromBytes ? runStaged(shape, data, bytes, build)
                                   : runInPlace(shape, data, bytes, build);
}

void* GlooAlgorithmCache::runStaged(const std::string& shape, void* data, int64_t bytes, const Build& build) {
  // Found by shape only, evicted by use order: both the same on every rank.
  auto it = std::find_if(staged_.begin(), staged_.end(),
                         [&](const CachedAlgorithm& c) { return c.shape == shape; });
  if (it != staged_.end()) {
    staged_.splice(staged_.begin(), staged_, it);
  } else {
    CachedAlgorithm entry;
    entry.shape = shape;
    entry.bytes = bytes;
    entry.staging.resize(static_cast<size_t>(bytes + sizeof(double) - 1) / sizeof(double));
    entry.memory = entry.staging.data();
    entry.algorithm = build(entry.memory);
    staged_.push_front(std::move(entry));
    if (staged_.size() > kMaxStagedEntries) staged_.pop_back();
    awaitEveryRankBuilt();
  }
  CachedAlgorithm& entry = staged_.front();
  std::memcpy(entry.memory, data, static_cast<size_t>(bytes));
  entry.algorithm->run();
  return entry.memory;
}

void* GlooAlgorithmCache::runInPlace(const std::string& shape, void* data, int64_t bytes,
                                     const Build& build) {
  auto it = std::find_if(inPlace_.begin(), inPlace_.end(),
                         [&](const CachedAlgorithm& c) { return c.shape == shape && c.memory == data; });
  if (everyRankHolds(it == inPlace_.end() ? -1 : it->id)) {
    inPlace_.splice(inPlace_.begin(), inPlace_, it);
  } else {
    // Every rank builds now, so the slots the new algorithm takes match.
    if (it != inPlace_.end()) {
      inPlaceBytes_ -= it->bytes;
      inPlace_.erase(it);
    }
    CachedAlgorithm entry;
    entry.shape = shape;
    entry.memory = data;
    entry.bytes = bytes;
    entry.id = nextInPlaceId_++;
    entry.algorithm = build(data);
    inPlace_.push_front(std::move(entry));
    inPlaceBytes_ += bytes;
    awaitEveryRankBuilt();
    // Eviction may differ between ranks (addresses differ); that is safe,
    // since a use is always agreed first.
    while (inPlace_.size() > 1 &&
           (inPlace_.size() > kMaxInPlaceEntries || inPlaceBytes_ > kMaxInPlaceBytes)) {
      inPlaceBytes_ -= inPlace_.back().bytes;
      inPlace_.pop_back();
    }
  }
  inPlace_.front().algorithm->run();
  return data;
}

void GlooAlgorithmCache::awaitEveryRankBuilt() {
  // Data that reaches a rank before it has built the algorithm it is for
  // (it is still in an earlier call) makes Gloo's event thread spin until
  // the buffer appears, which on a busy machine starves the very rank it is
  // waiting for. A barrier after every build is cheap next to that: builds
  // are rare once a training loop has run its first step.
  barrier_.run();
}

bool GlooAlgorithmCache::everyRankHolds(int64_t id) {
  const std::vector<int64_t> ids = exchange_.run(id);
  return id >= 0 && std::all_of(ids.begin(), ids.end(), [&](int64_t other) { return other == id; });
}

}  // namespace dtrain
