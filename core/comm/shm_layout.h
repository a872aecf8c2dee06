// The layout of a shared-memory group's segment (ShmProcessGroup):
//
//   [ShmSegmentInfo]                 one cache line, written by rank 0 before it
//                                    publishes the segment's name; read-only after
//   [ShmRankState] x size            two cache lines per rank (below)
//   (padding to a 4 KiB page)
//   [slot 0] .. [slot size-1]        slot_bytes each: what rank r puts out for the others
//   [result]                         slot_bytes: the reduced chunk, written in parts
//
// A ShmLayout is a view over the mapped bytes; it owns nothing. The counters
// are std::atomic in shared memory: lock-free on every target dtrain builds
// for (checked below), so they work across processes as across threads.
#pragma once
#include <atomic>
#include <cstdint>

namespace dtrain {

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the shared-memory group needs lock-free 64-bit atomics");

// "dtrnshm1" as a little-endian integer: a segment that is not ours is refused.
constexpr uint64_t kShmMagic = 0x316d6873'6e727464ULL;
constexpr uint32_t kShmVersion = 2;

struct alignas(64) ShmSegmentInfo {
  uint64_t magic;
  uint32_t version;
  int32_t size;        // ranks
  int64_t slotBytes;   // bytes of each slot and of the result area
  int64_t totalBytes;  // of the whole segment
};

// One rank's shared state. The counter has a cache line of its own, so a rank
// bumping it does not disturb a peer polling another rank's.
struct ShmRankState {
  // Barriers this rank has arrived at: 1 once it has joined, then one more per
  // phase of every call. Only the rank writes it (release); peers read it (acquire).
  alignas(64) std::atomic<uint64_t> arrivals;
  // The low 32 bits of `arrivals`, written after it: the word peers sleep on
  // (a futex is 32 bits), and how many of them sleep there now, so that a
  // rank arriving makes the wake-up call only when someone waits.
  std::atomic<uint32_t> arrivalWord;
  std::atomic<uint32_t> sleepers;
  // The rank's process, recorded when it joins (0 before): for the liveness
  // check and for messages. pidNamespace tells whether the pid means the same
  // process here (0 when unknown).
  alignas(64) std::atomic<int64_t> pid;
  std::atomic<uint64_t> pidNamespace;
  // 1 once the rank gave up (a failed call or join) or destroyed its group:
  // it will not arrive again. Set after its last arrival.
  std::atomic<uint32_t> left;
};

class ShmLayout {
 public:
  // A view over `base`, a segment for `size` ranks and `slotBytes`-byte slots.
  ShmLayout(uint8_t* base, int size, int64_t slotBytes);

  // Bytes before the first slot: info and rank states, rounded up to a page.
  static int64_t headerBytes(int size);
  // Bytes of the whole segment: header + (size + 1) * slotBytes.
  static int64_t totalBytes(int size, int64_t slotBytes);
  // Constructs the info and the rank states in fresh (zeroed) memory of totalBytes.
  static void initialise(uint8_t* base, int size, int64_t slotBytes);
  // The info of a mapped segment, to check before trusting its layout.
  static const ShmSegmentInfo& infoOf(const uint8_t* base);

  int size() const { return size_; }
  int64_t slotBytes() const { return slotBytes_; }
  ShmRankState& rank(int r) const;
  uint8_t* slot(int r) const { return base_ + headerBytes_ + int64_t(r) * slotBytes_; }
  uint8_t* result() const { return slot(size_); }

 private:
  uint8_t* base_;
  int size_;
  int64_t slotBytes_;
  int64_t headerBytes_;
};

}  // namespace dtrain
