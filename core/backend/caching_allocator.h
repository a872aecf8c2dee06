// A caching allocator for device memory: blocks released by the program go
// back to a free list and are handed out again for a request of the same
// rounded size, so a training loop that asks for the same buffers every step
// calls the device's allocator (cudaMalloc, which synchronises the device)
// only in its first step. The raw allocator is injected, so the caching
// policy is the same code on every device and is tested on the CPU.
//
// Sizes are rounded up to 512 bytes below 1 MiB and to 2 MiB above, so
// buffers of nearly the same size share blocks. When the raw allocator fails,
// every cached free block is returned to it and the request is tried once more.
//
// Blocks are reused in program order: a block used by work queued on a device
// stream must be released only once that work cannot touch it any more (on
// the stream the next user queues on, or after synchronising).
//
// Pools for recorded work (CUDA graphs, core/backend/step_graph.h): a replay
// writes every buffer its recording used, long after the host code that
// released them has moved on. So every block handed out when a pool starts
// recording, or handed out or released while it records, belongs to it; a
// released pool block is kept for that pool's own requests and handed to
// nobody else until the pool is dropped (pools are dropped together: a block
// stays with the first pool that took it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtrain {

struct RawAllocator {
  std::string device;                     // for messages: "cuda:0"
  std::function<void*(size_t)> allocate;  // nullptr when out of memory
  std::function<void(void*)> free;
  std::function<std::string()> free_bytes;  // optional: "3.1 GiB free of 80 GiB", for messages
};

struct CachingAllocatorStats {
  int64_t in_use_bytes = 0;  // handed out and not released
  int64_t cached_bytes = 0;  // released, kept for reuse
  int64_t peak_in_use_bytes = 0;
  int64_t raw_allocations = 0;  // calls that reached the raw allocator
  int64_t reuses = 0;           // requests served from the cache
  int64_t pooled_bytes = 0;     // released into a recording pool, kept for it
  // The most in use and pooled together (a pool's blocks are memory its
  // replays write), since construction or the last restartPeak(): the device
  // memory a training step needs, with or without recorded steps.
  int64_t peak_held_bytes = 0;
};

class CachingAllocator {
 public:
  explicit CachingAllocator(RawAllocator raw);
  ~CachingAllocator();  // returns every block to the raw allocator
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (nullptr for 0). Throws DeviceError naming
  // the device and the sizes when the raw allocator fails even after the
  // cache was emptied.
  void* allocate(size_t bytes);
  // Returns a block from allocate() to the cache; nullptr is ignored. Throws
  // DeviceError for a pointer this allocator did not hand out.
  void release(void* block);
  // Gives every cached free block back to the raw allocator.
  void emptyCache();
  CachingAllocatorStats stats() const;
  // peak_held_bytes of the span now ending; the next starts from what is
  // held now. So a peak can be read per step, apart from the first steps'
  // algorithm searches and their scratch memory.
  int64_t restartPeak();

  // Opens a pool that records every block handed out or released until
  // endRecording(); one records at a time (throws Error otherwise).
  int beginRecording();
  void endRecording();
  // The recording that used the pool is gone (and the device done with it):
  // its free blocks return to the cache, its live ones will on release.
  void dropPool(int pool);

  // The size a request is served with.
  static size_t roundedSize(size_t bytes);

 private:
  void emptyCacheLocked();

  using FreeLists = std::map<size_t, std::vector<void*>>;  // rounded size -> blocks
  // A block from `lists` of exactly `size`, or null.
  static void* take(FreeLists& lists, size_t size);

  RawAllocator raw_;
  mutable std::mutex mutex_;
  FreeLists free_;                          // the shared cache
  std::unordered_map<void*, size_t> live_;  // handed out -> rounded size
  std::map<int, FreeLists> pools_;          // recording pools' released blocks
  std::unordered_map<void*, int> pool_of_;  // blocks that belong to a pool
  int recording_ = -1;                      // the pool recording now, or -1
  int next_pool_ = 0;
  CachingAllocatorStats stats_;
};

}  // namespace dtrain
