#include "core/comm/shm_process_group.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "core/comm/collective_checks.h"
#include "core/comm/shm_join.h"
#include "core/comm/shm_layout.h"
#include "core/comm/shm_ordered_sum.h"
#include "core/comm/shm_segment.h"
#include "core/comm/shm_wait.h"
#include "core/errors.h"

namespace dtrain {

namespace {

constexpr int64_t kMaxSlotBytes = int64_t(1) << 40;

std::string whoText(int rank, int size) {
  return "shm group (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
}

// Rank r's part [begin, end) of a chunk of m elements: equal shares rounded
// up to whole cache lines, so no two ranks write the same line of the result.
std::pair<int64_t, int64_t> partOf(int r, int size, int64_t m, size_t elementSize) {
  const int64_t perLine = 64 / int64_t(elementSize);
  const int64_t share = ((m + size - 1) / size + perLine - 1) / perLine * perLine;
  const int64_t begin = std::min(m, share * r);
  return {begin, std::min(m, begin + share)};
}

ShmOptions checked(ShmOptions options, int rank, int size) {
  if (size < 1) throw CommError("shm group: size " + std::to_string(size) + " must be at least 1");
  const std::string who = whoText(rank, size);
  if (rank < 0 || rank >= size)
    throw CommError(who + ": the rank must be between 0 and " + std::to_string(size - 1));
  if (options.timeout.count() <= 0)
    throw CommError(who + ": the timeout must be positive (it is " + shmDurationText(options.timeout) + ")");
  if (options.slot_bytes <= 0 || options.slot_bytes % 64 != 0 || options.slot_bytes > kMaxSlotBytes)
    throw CommError(who + ": slot_bytes " + std::to_string(options.slot_bytes) +
                    " must be a positive multiple of 64, at most 1 TiB (the default is 4 MiB)");
  return options;
}

}  // namespace

ShmProcessGroup::ShmProcessGroup(Store& store, int rank, int size, ShmOptions options)
    : rank_(rank), size_(size), options_(checked(std::move(options), rank, size)), who_(whoText(rank, size)) {
  if (size_ == 1) return;  // every collective is a copy or nothing
  try {
    segment_ = joinShmSegment(store, rank_, size_, options_.slot_bytes, options_.prefix, options_.timeout);
  } catch (const CommError& e) {
    throw CommError(who_ + ": " + e.what());
  }
  layout_ = std::make_unique<ShmLayout>(segment_->data(), size_, options_.slot_bytes);
}

ShmProcessGroup::~ShmProcessGroup() {
  // Peers still waiting for this rank's arrival would wait in vain: they stop
  // at their next check. One that already arrived everywhere is not awaited.
  if (layout_) layout_->rank(rank_).left.store(1, std::memory_order_release);
}

std::string ShmProcessGroup::describe() const {
  return "shared memory (" + std::to_string(size_) + (size_ == 1 ? " rank" : " ranks") + " on this host)";
}

void ShmProcessGroup::phase() {
  ++arrivals_;
  announceArrival(layout_->rank(rank_), arrivals_);
  awaitArrivals(*layout_, rank_, arrivals_, options_.timeout, ShmWaitPurpose::Call, &abandoned_);
}

void ShmProcessGroup::abandon() { abandoned_.store(true, std::memory_order_release); }

template <typename Body>
void ShmProcessGroup::collective(const std::string& operation, Body&& body) {
  if (!failure_.empty())
    throw CommError(who_ + ": " + operation + ": the group failed earlier (" + failure_ +
                    "); it cannot be used again");
  if (abandoned_.load(std::memory_order_acquire)) failure_ = "the run is re-forming its group";
  if (!failure_.empty()) throw CommError(who_ + ": " + operation + ": " + failure_);
  try {
    body();
    return;
  } catch (const std::exception& e) {
    failure_ = e.what();
  }
  // The phases are out of step now: tell the peers not to wait for this rank.
  layout_->rank(rank_).left.store(1, std::memory_order_release);
  throw CommError(who_ + ": " + operation + ": " + failure_);
}

template <typename T>
void ShmProcessGroup::allReduceChunks(T* data, int64_t n, int64_t keep_begin, int64_t keep_end) {
  // The phases and why no slot or result part is overwritten while read: see the header.
  const int64_t chunk = options_.slot_bytes / int64_t(sizeof(T));
  T* result = reinterpret_cast<T*>(layout_->result());
  std::vector<const T*> parts(size_);
  for (int64_t offset = 0; offset < n; offset += chunk) {
    const int64_t m = std::min(chunk, n - offset);
    const size_t bytes = static_cast<size_t>(m) * sizeof(T);
    std::memcpy(layout_->slot(rank_), data + offset, bytes);  // A
    phase();
    const auto [begin, end] = partOf(rank_, size_, m, sizeof(T));  // B
    if (end > begin) {
      for (int r = 0; r < size_; ++r) parts[r] = reinterpret_cast<const T*>(layout_->slot(r)) + begin;
      sumInOrder(parts.data(), size_, result + begin, end - begin);
    }
    phase();
    const int64_t from = std::max(offset, keep_begin), to = std::min(offset + m, keep_end);  // C
    if (to > from)
      std::memcpy(data + from, result + (from - offset), static_cast<size_t>(to - from) * sizeof(T));
  }
}

void ShmProcessGroup::broadcastChunks(uint8_t* data, int64_t bytes, int root) {
  const int64_t chunk = options_.slot_bytes;
  const uint8_t* slot = layout_->slot(root);
  for (int64_t offset = 0; offset < bytes; offset += chunk) {
    const size_t m = static_cast<size_t>(std::min(chunk, bytes - offset));
    if (rank_ == root) std::memcpy(layout_->slot(root), data + offset, m);
    phase();
    if (rank_ != root) std::memcpy(data + offset, slot, m);
    phase();  // the root's next write waits until all have read
  }
}

void ShmProcessGroup::allGatherChunks(const float* in, int64_t n, float* out) {
  const int64_t chunk = options_.slot_bytes / int64_t(sizeof(float));
  for (int64_t offset = 0; offset < n; offset += chunk) {
    const int64_t m = std::min(chunk, n - offset);
    const size_t bytes = static_cast<size_t>(m) * sizeof(float);
    std::memcpy(layout_->slot(rank_), in + offset, bytes);
    phase();
    for (int r = 0; r < size_; ++r) std::memcpy(out + r * n + offset, layout_->slot(r), bytes);
    phase();  // the next writes wait until all have read
  }
}

void ShmProcessGroup::allReduceSum(float* data, int64_t n) {
  checkElementCount("all-reduce", n);
  if (n == 0 || size_ == 1) return;
  collective("all-reduce of " + elementCountText(n, "floats"), [&] { allReduceChunks(data, n); });
}

void ShmProcessGroup::allReduceSum(double* data, int64_t n) {
  checkElementCount("all-reduce", n);
  if (n == 0 || size_ == 1) return;
  collective("all-reduce of " + elementCountText(n, "doubles"), [&] { allReduceChunks(data, n); });
}

void ShmProcessGroup::broadcast(float* data, int64_t n, int root) {
  checkElementCount("broadcast", n);
  checkRootRank("broadcast", root, size_);
  if (n == 0 || size_ == 1) return;
  collective("broadcast of " + elementCountText(n, "floats") + " from rank " + std::to_string(root),
             [&] { broadcastChunks(reinterpret_cast<uint8_t*>(data), n * int64_t(sizeof(float)), root); });
}

void ShmProcessGroup::broadcastBytes(uint8_t* data, int64_t n, int root) {
  checkElementCount("broadcast", n);
  checkRootRank("broadcast", root, size_);
  if (n == 0 || size_ == 1) return;
  collective("broadcast of " + elementCountText(n, "bytes") + " from rank " + std::to_string(root),
             [&] { broadcastChunks(data, n, root); });
}

void ShmProcessGroup::allGather(const float* in, int64_t n, float* out) {
  checkElementCount("all-gather", n);
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (size_ == 1) {
    std::memmove(out, in, bytes);  // in == out for an in-place gather
    return;
  }
  collective("all-gather of " + elementCountText(n, "floats"), [&] {
    // An input inside the output would be overwritten by other ranks' parts
    // before all of it is sent: it goes through a copy of its own.
    std::vector<float> copy;
    const float* input = in;
    if (buffersOverlap(in, bytes, out, bytes * static_cast<size_t>(size_))) {
      copy.assign(in, in + n);
      input = copy.data();
    }
    allGatherChunks(input, n, out);
  });
}

void ShmProcessGroup::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  const int64_t total = reduceScatterTotal(counts, size_);
  if (total == 0 || size_ == 1) return;
  // The all-reduce's two phases per chunk (the parts of the sum spread
  // evenly over the ranks whatever the counts), of which each rank reads
  // back its own segment alone.
  int64_t begin = 0;
  for (int r = 0; r < rank_; ++r) begin += counts[static_cast<size_t>(r)];
  collective("reduce-scatter of " + elementCountText(total, "floats"),
             [&] { allReduceChunks(data, total, begin, begin + counts[static_cast<size_t>(rank_)]); });
}

void ShmProcessGroup::allGatherInPlace(float* data, const std::vector<int64_t>& counts) {
  const int64_t total = reduceScatterTotal(counts, size_);
  if (total == 0 || size_ == 1) return;
  std::vector<int64_t> offsets(static_cast<size_t>(size_), 0);
  int64_t longest = 0;
  for (int r = 0; r < size_; ++r) {
    if (r > 0)
      offsets[static_cast<size_t>(r)] =
          offsets[static_cast<size_t>(r) - 1] + counts[static_cast<size_t>(r) - 1];
    longest = std::max(longest, counts[static_cast<size_t>(r)]);
  }
  // Round k: every rank puts the k-th chunk of its segment in its slot at
  // once, then reads the others'.
  const int64_t chunk = options_.slot_bytes / int64_t(sizeof(float));
  collective("all-gather of " + elementCountText(total, "floats"), [&] {
    for (int64_t at = 0; at < longest; at += chunk) {
      auto part = [&](int r) {
        return std::max<int64_t>(0, std::min(chunk, counts[static_cast<size_t>(r)] - at));
      };
      if (part(rank_) > 0)
        std::memcpy(layout_->slot(rank_), data + offsets[static_cast<size_t>(rank_)] + at,
                    static_cast<size_t>(part(rank_)) * sizeof(float));
      phase();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && part(r) > 0)
          std::memcpy(data + offsets[static_cast<size_t>(r)] + at, layout_->slot(r),
                      static_cast<size_t>(part(r)) * sizeof(float));
      phase();  // the next writes wait until all have read
    }
  });
}

void ShmProcessGroup::barrier() {
  if (size_ == 1) return;
  collective("barrier", [&] { phase(); });
}

}  // namespace dtrain
