// The device memory cache, over a counting stand-in for cudaMalloc: a
// training loop's repeated requests reach the raw allocator only once, sizes
// are rounded into shared blocks, a failed raw allocation empties the cache
// and retries, and misuse is refused with a message.
#include "core/backend/caching_allocator.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"

using namespace dtrain;

namespace {

// malloc-backed, with a byte budget standing in for the device's memory.
struct FakeDevice {
  int64_t budget = int64_t(1) << 40;
  int64_t used = 0;
  int allocations = 0, frees = 0;
  std::set<void*> live;

  RawAllocator raw() {
    RawAllocator r;
    r.device = "fake:0";
    r.allocate = [this](size_t bytes) -> void* {
      if (used + static_cast<int64_t>(bytes) > budget) return nullptr;
      void* p = std::malloc(bytes);
      used += static_cast<int64_t>(bytes);
      sizes[p] = bytes;
      live.insert(p);
      ++allocations;
      return p;
    };
    r.free = [this](void* p) {
      REQUIRE(live.erase(p) == 1);
      used -= static_cast<int64_t>(sizes[p]);
      std::free(p);
      ++frees;
    };
    r.free_bytes = [this] { return std::to_string(budget - used) + " bytes free"; };
    return r;
  }
  std::map<void*, size_t> sizes;
};

}  // namespace

TEST_CASE("caching allocator: sizes round to 512 bytes below 1 MiB and to 2 MiB above") {
  CHECK(CachingAllocator::roundedSize(1) == 512);
  CHECK(CachingAllocator::roundedSize(512) == 512);
  CHECK(CachingAllocator::roundedSize(513) == 1024);
  CHECK(CachingAllocator::roundedSize((1 << 20) - 1) == (1 << 20));
  CHECK(CachingAllocator::roundedSize(1 << 20) == (2 << 20));
  CHECK(CachingAllocator::roundedSize((2 << 20) + 1) == (4 << 20));
}

TEST_CASE("caching allocator: a step's buffers reach the raw allocator in the first step only") {
  FakeDevice dev;
  {
    CachingAllocator cache(dev.raw());
    const size_t sizes[] = {4000, 123456, 3 << 20, 4000, 77};
    for (int step = 0; step < 10; ++step) {
      std::vector<void*> blocks;
      for (size_t s : sizes) blocks.push_back(cache.allocate(s));
      std::set<void*> distinct(blocks.begin(), blocks.end());
      CHECK(distinct.size() == blocks.size());  // live blocks never shared
      for (void* b : blocks) cache.release(b);
    }
    const CachingAllocatorStats st = cache.stats();
    CHECK(dev.allocations == 5);
    CHECK(st.raw_allocations == 5);
    CHECK(st.reuses == 45);
    CHECK(st.in_use_bytes == 0);
    CHECK(st.cached_bytes == 4096 + 123904 + (4 << 20) + 4096 + 512);
    CHECK(st.peak_in_use_bytes == st.cached_bytes);
    CHECK(cache.allocate(0) == nullptr);
    cache.release(nullptr);  // ignored
  }
  CHECK(dev.frees == 5);  // everything returned at destruction
  CHECK(dev.live.empty());
}

TEST_CASE("caching allocator: a request that does not fit empties the cache and is tried again") {
  FakeDevice dev;
  dev.budget = 8 << 20;
  CachingAllocator cache(dev.raw());
  void* a = cache.allocate(3 << 20);  // 4 MiB block
  cache.release(a);
  CHECK(cache.stats().cached_bytes == (4 << 20));
  void* b = cache.allocate(5 << 20);  // 6 MiB: fits only once the cached 4 MiB is freed
  CHECK(b != nullptr);
  CHECK(cache.stats().cached_bytes == 0);
  CHECK(dev.frees == 1);
  // Too large even with an empty cache: a message that names the device and sizes.
  try {
    cache.allocate(5 << 20);
    FAIL("expected an out-of-memory error");
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    CHECK(what.find("fake:0: out of memory allocating 6.0 MiB") == 0);
    CHECK(what.find("6.0 MiB in use by dtrain") != std::string::npos);
    CHECK(what.find("2097152 bytes free") != std::string::npos);
    CHECK(what.find("batch_size") != std::string::npos);
  }
  cache.release(b);
}

TEST_CASE("caching allocator: releasing a foreign pointer is refused; emptyCache returns free blocks only") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  int local = 0;
  CHECK_THROWS_WITH_AS(cache.release(&local),
                       "fake:0: caching allocator: release of a block it did not hand out", DeviceError);
  void* kept = cache.allocate(1000);
  void* dropped = cache.allocate(2000);
  cache.release(dropped);
  cache.emptyCache();
  CHECK(dev.frees == 1);
  CHECK(dev.live.count(kept) == 1);
  CHECK(cache.stats().in_use_bytes == 1024);
  cache.release(kept);
}

// A recorded CUDA graph writes, on every replay, each buffer its recording
// used: no other work may be handed one of them while the graph lives.
TEST_CASE("a recording pool keeps every block the recording used until it is dropped") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  void* before = cache.allocate(4096);  // used by the recording, released during it
  cache.release(cache.allocate(8192));  // an idle cached block the recording may take
  const int pool = cache.beginRecording();
  void* taken = cache.allocate(8192);  // from the shared cache: now the pool's
  void* temp = cache.allocate(1000);   // raw, while recording
  cache.release(temp);
  void* again = cache.allocate(1000);  // within the recording: its own released block
  CHECK(again == temp);
  cache.release(again);
  cache.release(before);
  void* kept = cache.allocate(100);  // handed out during the recording, released after it
  cache.endRecording();
  cache.release(kept);
  cache.release(taken);
  CHECK(cache.stats().cached_bytes == 0);  // nothing went back to the shared cache
  CHECK(cache.stats().pooled_bytes > 0);
  // Work after the recording gets fresh memory, never the graph's.
  std::set<void*> graph_blocks = {before, taken, temp, kept};
  for (size_t bytes : {size_t(4096), size_t(8192), size_t(1000), size_t(100)}) {
    void* p = cache.allocate(bytes);
    CHECK(graph_blocks.count(p) == 0);
    cache.release(p);
  }
  // Dropped with its graph, the pool's blocks serve everyone again.
  cache.dropPool(pool);
  CHECK(cache.stats().pooled_bytes == 0);
  const int raw_before = dev.allocations;
  void* reused = cache.allocate(4096);
  CHECK(dev.allocations == raw_before);
  cache.release(reused);
}

TEST_CASE("a block of a dropped pool still handed out returns to the shared cache when released") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  const int pool = cache.beginRecording();
  void* live = cache.allocate(2048);
  cache.endRecording();
  cache.dropPool(pool);
  cache.release(live);
  CHECK(cache.stats().cached_bytes == static_cast<int64_t>(CachingAllocator::roundedSize(2048)));
  CHECK(cache.allocate(2048) == live);
}

TEST_CASE("one pool records at a time") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  cache.beginRecording();
  CHECK_THROWS_AS(cache.beginRecording(), Error);
  cache.endRecording();
  const int second = cache.beginRecording();
  cache.endRecording();
  cache.dropPool(second);
}

TEST_CASE("a block handed out before a recording and released after it stays with the pool") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  void* workspace = cache.allocate(1 << 20);  // say, a layer's workspace the recorded work uses
  const int pool = cache.beginRecording();
  cache.endRecording();
  cache.release(workspace);                     // the layer grows its workspace after the recording
  CHECK(cache.allocate(1 << 20) != workspace);  // a replay still writes the old one
  cache.dropPool(pool);
  CHECK(cache.allocate(1 << 20) == workspace);
}

// The training log's per-step device memory: a span's peak counts what a
// recorded step's pool keeps (its replays write it) and starts afresh from
// what is held, so a first step's large scratch block is left behind.
TEST_CASE("the held peak counts pooled blocks and restarts from what is held") {
  FakeDevice dev;
  CachingAllocator cache(dev.raw());
  void* params = cache.allocate(4096);
  cache.release(cache.allocate(8 << 20));  // an algorithm search's scratch
  CHECK(cache.restartPeak() == 4096 + (8 << 20));
  CHECK(cache.stats().peak_held_bytes == 4096);
  const int pool = cache.beginRecording();
  void* activation = cache.allocate(2048);
  cache.release(activation);  // kept for the pool: still held
  cache.endRecording();
  CHECK(cache.restartPeak() == 4096 + 2048);
  CHECK(cache.restartPeak() == 4096 + 2048);  // a replayed step allocates nothing, yet holds it
  CHECK(cache.stats().peak_in_use_bytes == 4096 + (8 << 20));  // since construction, never restarted
  cache.dropPool(pool);
  CHECK(cache.restartPeak() == 4096 + 2048);
  CHECK(cache.restartPeak() == 4096);
  cache.release(params);
}
