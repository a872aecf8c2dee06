#include "core/comm/shm_layout.h"

#include <cstddef>
#include <new>

namespace dtrain {

namespace {

constexpr int64_t kPageBytes = 4096;

}  // namespace

ShmLayout::ShmLayout(uint8_t* base, int size, int64_t slotBytes)
    : base_(base), size_(size), slotBytes_(slotBytes), headerBytes_(headerBytes(size)) {}

int64_t ShmLayout::headerBytes(int size) {
  const int64_t bytes = int64_t(sizeof(ShmSegmentInfo)) + int64_t(size) * int64_t(sizeof(ShmRankState));
  // Page-aligned slots: whole pages per slot, and aligned vector loads.
  return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

int64_t ShmLayout::totalBytes(int size, int64_t slotBytes) {
  return headerBytes(size) + (int64_t(size) + 1) * slotBytes;
}

void ShmLayout::initialise(uint8_t* base, int size, int64_t slotBytes) {
  auto* info = new (base) ShmSegmentInfo{};
  info->magic = kShmMagic;
  info->version = kShmVersion;
  info->size = size;
  info->slotBytes = slotBytes;
  info->totalBytes = totalBytes(size, slotBytes);
  for (int r = 0; r < size; ++r) {
    auto* state = new (base + sizeof(ShmSegmentInfo) + size_t(r) * sizeof(ShmRankState)) ShmRankState;
    state->arrivals.store(0, std::memory_order_relaxed);
    state->arrivalWord.store(0, std::memory_order_relaxed);
    state->sleepers.store(0, std::memory_order_relaxed);
    state->pid.store(0, std::memory_order_relaxed);
    state->pidNamespace.store(0, std::memory_order_relaxed);
    state->left.store(0, std::memory_order_relaxed);
  }
}

const ShmSegmentInfo& ShmLayout::infoOf(const uint8_t* base) {
  return *std::launder(reinterpret_cast<const ShmSegmentInfo*>(base));
}

ShmRankState& ShmLayout::rank(int r) const {
  return *std::launder(
      reinterpret_cast<ShmRankState*>(base_ + sizeof(ShmSegmentInfo) + size_t(r) * sizeof(ShmRankState)));
}

}  // namespace dtrain
