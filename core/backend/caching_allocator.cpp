#include "core/backend/caching_allocator.h"

#include <cstdio>
#include <iterator>
#include <utility>

#include "core/errors.h"

namespace dtrain {

namespace {

constexpr size_t kSmallStep = 512;
constexpr size_t kLargeFrom = size_t(1) << 20;
constexpr size_t kLargeStep = size_t(2) << 20;

std::string bytesText(int64_t bytes) {
  char buf[64];
  if (bytes >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(int64_t(1) << 30));
  else if (bytes >= (int64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / double(int64_t(1) << 20));
  else
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  return buf;
}

}  // namespace

CachingAllocator::CachingAllocator(RawAllocator raw) : raw_(std::move(raw)) {
  if (!raw_.allocate || !raw_.free) throw DeviceError("caching allocator: no raw allocate/free given");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  emptyCacheLocked();
  for (auto& [id, lists] : pools_)
    for (auto& [size, blocks] : lists)
      for (void* block : blocks) raw_.free(block);
  // Blocks still handed out belong to objects destroyed after this one; the
  // device memory goes back all the same.
  for (auto& [block, size] : live_) raw_.free(block);
}

size_t CachingAllocator::roundedSize(size_t bytes) {
  const size_t step = bytes < kLargeFrom ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = roundedSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  if (recording_ >= 0 && (block = take(pools_[recording_], size))) {
    stats_.pooled_bytes -= static_cast<int64_t>(size);
    ++stats_.reuses;
  } else if ((block = take(free_, size))) {
    stats_.cached_bytes -= static_cast<int64_t>(size);
    ++stats_.reuses;
  } else {
    block = raw_.allocate(size);
    if (!block && stats_.cached_bytes > 0) {
      emptyCacheLocked();  // cached blocks of other sizes may make room
      block = raw_.allocate(size);
    }
    if (!block)
      throw DeviceError(raw_.device + ": out of memory allocating " + bytesText(static_cast<int64_t>(size)) +
                        " (" + bytesText(stats_.in_use_bytes) + " in use by dtrain" +
                        (raw_.free_bytes ? ", " + raw_.free_bytes() : std::string()) +
                        "); use a smaller batch_size or model");
    ++stats_.raw_allocations;
  }
  live_.emplace(block, size);
  if (recording_ >= 0) pool_of_[block] = recording_;
  stats_.in_use_bytes += static_cast<int64_t>(size);
  if (stats_.in_use_bytes > stats_.peak_in_use_bytes) stats_.peak_in_use_bytes = stats_.in_use_bytes;
  // Only an allocation raises what is held: a release to a pool keeps it held.
  const int64_t held = stats_.in_use_bytes + stats_.pooled_bytes;
  if (held > stats_.peak_held_bytes) stats_.peak_held_bytes = held;
  return block;
}

void CachingAllocator::release(void* block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(block);
  if (it == live_.end())
    throw DeviceError(raw_.device + ": caching allocator: release of a block it did not hand out");
  const size_t size = it->second;
  live_.erase(it);
  stats_.in_use_bytes -= static_cast<int64_t>(size);
  // Released while a pool records, the recorded work may still use it (it
  // was used before the release in the recording's order): the pool keeps it.
  if (recording_ >= 0) pool_of_[block] = recording_;
  auto pooled = pool_of_.find(block);
  if (pooled != pool_of_.end()) {
    pools_[pooled->second][size].push_back(block);
    stats_.pooled_bytes += static_cast<int64_t>(size);
    return;
  }
  free_[size].push_back(block);
  stats_.cached_bytes += static_cast<int64_t>(size);
}

void* CachingAllocator::take(FreeLists& lists, size_t size) {
  auto found = lists.find(size);
  if (found == lists.end() || found->second.empty()) return nullptr;
  void* block = found->second.back();
  found->second.pop_back();
  return block;
}

int CachingAllocator::beginRecording() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recording_ >= 0) throw Error(raw_.device + ": caching allocator: a pool is recording already");
  recording_ = next_pool_++;
  pools_[recording_];
  // Blocks handed out before may be used by the recorded work too (the
  // parameters, a layer's workspace): whenever released, they stay reserved.
  for (const auto& [block, size] : live_) pool_of_.emplace(block, recording_);
  return recording_;
}

void CachingAllocator::endRecording() {
  std::lock_guard<std::mutex> lock(mutex_);
  recording_ = -1;
}

void CachingAllocator::dropPool(int pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recording_ == pool) recording_ = -1;
  auto lists = pools_.find(pool);
  if (lists == pools_.end()) return;
  for (auto& [size, blocks] : lists->second) {
    for (void* block : blocks) {
      free_[size].push_back(block);
      pool_of_.erase(block);
      stats_.pooled_bytes -= static_cast<int64_t>(size);
      stats_.cached_bytes += static_cast<int64_t>(size);
    }
  }
  pools_.erase(lists);
  for (auto it = pool_of_.begin(); it != pool_of_.end();)  // live blocks: to the cache when released
    it = it->second == pool ? pool_of_.erase(it) : std::next(it);
}

void CachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  emptyCacheLocked();
}

void CachingAllocator::emptyCacheLocked() {
  for (auto& [size, blocks] : free_)
    for (void* block : blocks) raw_.free(block);
  free_.clear();
  stats_.cached_bytes = 0;
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

int64_t CachingAllocator::restartPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t peak = stats_.peak_held_bytes;
  stats_.peak_held_bytes = stats_.in_use_bytes + stats_.pooled_bytes;
  return peak;
}

}  // namespace dtrain
