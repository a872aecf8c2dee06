#include "datasets/batch_loader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "datasets/dataset.h"
#include "datasets/sampler.h"
#include "tests/datasets/test_loader.h"

using namespace dtrain;
using dtrain::test::prefetched;

namespace {

// Sample i: every pixel is (i + 1) / 1024 plus the pixel index / 1e6, label i % 7.
// Pixels identify the sample, so duplicates and misplacements are visible.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(int64_t n, Shape shape = Shape{1, 2, 3}) : n_(n), shape_(shape) {}
  std::string describe() const override { return "index"; }
  int64_t size() const override { return n_; }
  Shape sampleShape() const override { return shape_; }
  int64_t classes() const override { return 7; }
  int32_t get(int64_t index, float* out) const override {
    if (index == slow_at_) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (index == throw_at_ || index == also_throw_at_)
      throw DataError("sample " + std::to_string(index) + " is broken");
    if (delay_us_) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    for (int64_t p = 0; p < shape_.numel(); ++p)
      out[p] = static_cast<float>(index + 1) / 1024.0f + static_cast<float>(p) * 1e-6f;
    return static_cast<int32_t>(index % 7);
  }
  int64_t throw_at_ = -1;
  int64_t also_throw_at_ = -1;
  int64_t slow_at_ = -1;  // this sample takes 30 ms
  int delay_us_ = 0;

 private:
  int64_t n_;
  Shape shape_;
};

// A batch copied out of the loader's reused buffers.
struct Copied {
  std::vector<float> pixels;
  std::vector<int32_t> labels;
  Shape shape;
  bool operator==(const Copied& o) const {
    return pixels == o.pixels && labels == o.labels && shape == o.shape;
  }
};

Copied copy(const Batch& b) {
  Copied c;
  c.pixels.assign(b.images.data(), b.images.data() + b.images.numel());
  c.labels = b.labels;
  c.shape = b.images.shape();
  return c;
}

std::vector<Copied> drain(BatchLoader& loader) {
  std::vector<Copied> out;
  Batch b;
  while (loader.next(b)) out.push_back(copy(b));
  return out;
}

std::vector<Copied> epoch(const Dataset& ds, const Sampler& s, int64_t batch, int prefetch, int64_t e,
                          int64_t position = 0, int threads = 1) {
  BatchLoader loader(ds, s, batch, prefetched(prefetch, Shard{}, threads));
  loader.start(e, position);
  return drain(loader);
}

template <class F>
double secondsOf(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("loader: every sample exactly once per epoch, matching dataset.get") {
  DataSection d;
  d.dataset = "synthetic";
  d.train_samples = 103;
  d.shape = {2, 5, 6};
  d.classes = 4;
  auto ds = openDataset(d, Split::Train, 11);
  const int64_t numel = ds->sampleShape().numel();
  for (int prefetch : {0, 1, 2, 5}) {
    CAPTURE(prefetch);
    Sampler sampler(ds->size(), 5, true);
    BatchLoader loader(*ds, sampler, 10, prefetched(prefetch));
    CHECK(loader.batchesPerEpoch() == 11);
    for (int64_t e : {0, 1}) {
      loader.start(e);
      const auto order = sampler.epochOrder(e);
      std::vector<float> expect(static_cast<size_t>(numel));
      Batch b;
      int64_t seen = 0, batches = 0;
      while (loader.next(b)) {
        REQUIRE(b.images.shape() == Shape{b.size, 2, 5, 6});
        REQUIRE(static_cast<int64_t>(b.labels.size()) == b.size);
        CHECK(reinterpret_cast<uintptr_t>(b.images.data()) % 64 == 0);
        for (int64_t i = 0; i < b.size; ++i, ++seen) {
          int32_t label = ds->get(order[static_cast<size_t>(seen)], expect.data());
          CHECK(b.labels[static_cast<size_t>(i)] == label);
          CHECK(std::memcmp(b.images.data() + i * numel, expect.data(), expect.size() * sizeof(float)) == 0);
        }
        ++batches;
        CHECK(loader.position() == seen);
      }
      CHECK(seen == 103);
      CHECK(batches == 11);
      CHECK_FALSE(loader.next(b));  // stays at the end
    }
  }
}

TEST_CASE("loader: sample identity check, partial last batch, and the same batches for any prefetch") {
  IndexDataset ds(10);
  Sampler sampler(10, 3, true);
  auto ref = epoch(ds, sampler, 4, 0, 2);
  REQUIRE(ref.size() == 3);
  CHECK(ref[0].shape == Shape{4, 1, 2, 3});
  CHECK(ref[1].shape == Shape{4, 1, 2, 3});
  CHECK(ref[2].shape == Shape{2, 1, 2, 3});
  std::set<int64_t> ids;
  for (const auto& b : ref)
    for (size_t i = 0; i < b.labels.size(); ++i) {
      int64_t id = static_cast<int64_t>(b.pixels[i * 6] * 1024.0f + 0.5f) - 1;
      CHECK(b.labels[i] == id % 7);
      ids.insert(id);
    }
  CHECK(ids.size() == 10);
  for (int prefetch : {1, 2, 3, 8}) CHECK(epoch(ds, sampler, 4, prefetch, 2) == ref);
  // A batch larger than the dataset: one partial batch.
  auto one = epoch(ds, sampler, 64, 2, 2);
  REQUIRE(one.size() == 1);
  CHECK(one[0].shape == Shape{10, 1, 2, 3});
}

TEST_CASE("loader: resuming mid-epoch yields exactly the remaining batches") {
  IndexDataset ds(50);
  Sampler sampler(50, 8, true);
  for (int prefetch : {0, 2}) {
    auto full = epoch(ds, sampler, 8, prefetch, 4);  // 7 batches: 6 x 8 + 2
    REQUIRE(full.size() == 7);
    for (int64_t k = 0; k <= 7; ++k) {
      BatchLoader loader(ds, sampler, 8, prefetched(prefetch));
      loader.start(4, std::min<int64_t>(50, k * 8));
      CHECK(loader.position() == std::min<int64_t>(50, k * 8));
      auto rest = drain(loader);
      CHECK(rest == std::vector<Copied>(full.begin() + k, full.end()));
      CHECK(loader.position() == 50);
    }
    // A position that is not a multiple of the batch: the same samples in the same order.
    BatchLoader loader(ds, sampler, 8, prefetched(prefetch));
    loader.start(4, 13);
    auto rest = drain(loader);
    std::vector<float> flat_full, flat_rest;
    for (const auto& b : full) flat_full.insert(flat_full.end(), b.pixels.begin(), b.pixels.end());
    for (const auto& b : rest) flat_rest.insert(flat_rest.end(), b.pixels.begin(), b.pixels.end());
    CHECK(flat_rest == std::vector<float>(flat_full.begin() + 13 * 6, flat_full.end()));
  }
}

TEST_CASE("loader: position() after some batches resumes the same stream") {
  IndexDataset ds(40);
  Sampler sampler(40, 1, true);
  auto full = epoch(ds, sampler, 6, 2, 0);
  BatchLoader a(ds, sampler, 6, prefetched(2));
  a.start(0);
  Batch b;
  for (int i = 0; i < 3; ++i) REQUIRE(a.next(b));
  const int64_t saved = a.position();
  CHECK(saved == 18);
  BatchLoader resumed(ds, sampler, 6, prefetched(2));
  resumed.start(0, saved);
  CHECK(drain(resumed) == std::vector<Copied>(full.begin() + 3, full.end()));
}

TEST_CASE("loader: start() again mid-epoch cancels and restarts cleanly") {
  IndexDataset ds(60);
  Sampler sampler(60, 2, true);
  auto e0 = epoch(ds, sampler, 7, 3, 0);
  auto e1 = epoch(ds, sampler, 7, 3, 1);
  CHECK(e0 != e1);
  for (int prefetch : {0, 1, 3}) {
    BatchLoader loader(ds, sampler, 7, prefetched(prefetch));
    Batch b;
    loader.start(0);
    REQUIRE(loader.next(b));
    REQUIRE(loader.next(b));
    loader.start(1);  // abandon epoch 0
    CHECK(loader.position() == 0);
    CHECK(drain(loader) == e1);
    loader.start(0);
    REQUIRE(loader.next(b));
    loader.start(0);  // restart the same epoch
    CHECK(drain(loader) == e0);
    // Many quick restarts while the thread is busy.
    for (int i = 0; i < 50; ++i) {
      loader.start(i % 2);
      if (i % 3 == 0) loader.next(b);
    }
    loader.start(1);
    CHECK(drain(loader) == e1);
  }
}

// Each rank's batch k is its contiguous slice of global batch k, so the
// ranks together see exactly what one rank sees, whatever the world size.
TEST_CASE("loader: ranks take slices of every global batch") {
  IndexDataset ds(23);
  Sampler sampler(23, 4, true);
  auto idsOf = [](const Copied& b) {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < b.labels.size(); ++i)
      ids.push_back(static_cast<int64_t>(b.pixels[i * 6] * 1024.0f + 0.5f) - 1);
    return ids;
  };
  BatchLoader whole(ds, sampler, 8, prefetched(2));
  whole.start(1);
  const auto global = drain(whole);
  REQUIRE(global.size() == 3);  // 8 + 8 + 7
  for (int world : {2, 3, 5, 8, 9}) {
    CAPTURE(world);
    std::vector<std::vector<Copied>> per_rank;
    for (int r = 0; r < world; ++r) {
      BatchLoader loader(ds, sampler, 8, prefetched(r % 2 ? 0 : 2, Shard{r, world}));
      CHECK(loader.batchesPerEpoch() == 3);
      loader.start(1);
      per_rank.push_back(drain(loader));
      CHECK(loader.position() == 23);  // global samples, whatever the rank
    }
    for (size_t k = 0; k < global.size(); ++k) {
      std::vector<int64_t> joined;
      for (int r = 0; r < world; ++r) {
        REQUIRE(per_rank[static_cast<size_t>(r)].size() == global.size());
        auto part = idsOf(per_rank[static_cast<size_t>(r)][k]);
        // WorkerPool::split sizes: n*r/world .. n*(r+1)/world.
        const int64_t n = static_cast<int64_t>(global[k].labels.size());
        CHECK(static_cast<int64_t>(part.size()) == n * (r + 1) / world - n * r / world);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      CHECK(joined == idsOf(global[k]));
    }
  }
}

TEST_CASE("loader: a resumed rank continues from a global position") {
  IndexDataset ds(23);
  Sampler sampler(23, 4, true);
  BatchLoader one(ds, sampler, 8, prefetched(2));
  one.start(0, 8);
  const auto rest = drain(one);
  // Two ranks resuming at the same position see the same batches between them.
  BatchLoader r0(ds, sampler, 8, prefetched(2, Shard{0, 2})), r1(ds, sampler, 8, prefetched(2, Shard{1, 2}));
  r0.start(0, 8);
  r1.start(0, 8);
  auto a = drain(r0), b = drain(r1);
  REQUIRE(a.size() == rest.size());
  REQUIRE(b.size() == rest.size());
  for (size_t k = 0; k < rest.size(); ++k) {
    std::vector<float> joined = a[k].pixels;
    joined.insert(joined.end(), b[k].pixels.begin(), b[k].pixels.end());
    CHECK(joined == rest[k].pixels);
  }
}

TEST_CASE("loader: a shard outside the world is an Error") {
  IndexDataset ds(10);
  Sampler sampler(10, 1, true);
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 4, prefetched(2, Shard{2, 2})), Error);
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 4, prefetched(2, Shard{-1, 2})), Error);
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 4, prefetched(2, Shard{0, 0})), Error);
}

TEST_CASE("loader: buffers are reused, not allocated per batch") {
  IndexDataset ds(100);
  Sampler sampler(100, 6, true);
  BatchLoader loader(ds, sampler, 8, prefetched(2));
  std::set<const float*> buffers;
  Batch b;
  for (int e = 0; e < 4; ++e) {
    loader.start(e);
    while (loader.next(b)) buffers.insert(b.images.data());
  }
  CHECK(buffers.size() <= 3);  // prefetch + the one held by the consumer
}

TEST_CASE("loader: an exception in the loader thread is rethrown by next()") {
  IndexDataset ds(20);
  ds.throw_at_ = 9;
  Sampler sampler(20, 0, false);  // identity order: sample 9 is in batch 2
  for (int prefetch : {0, 1, 4}) {
    CAPTURE(prefetch);
    BatchLoader loader(ds, sampler, 4, prefetched(prefetch));
    loader.start(0);
    Batch b;
    REQUIRE(loader.next(b));
    REQUIRE(loader.next(b));
    CHECK_THROWS_WITH_AS(loader.next(b), "sample 9 is broken", DataError);
    CHECK_THROWS_AS(loader.next(b), DataError);  // stays failed
    loader.start(0, 12);                         // past the bad sample: recovers
    auto rest = drain(loader);
    CHECK(rest.size() == 2);
  }
}

TEST_CASE("loader: the destructor never hangs") {
  IndexDataset ds(1000, Shape{1, 28, 28});
  Sampler sampler(1000, 1, true);
  SUBCASE("thread blocked on full buffers") {
    double s = secondsOf([&] {
      BatchLoader loader(ds, sampler, 16, prefetched(2));
      loader.start(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the thread fills both slots and waits
    });
    CHECK(s < 2.0);
  }
  SUBCASE("thread in the middle of a slow batch") {
    ds.delay_us_ = 2000;  // 2 ms a sample: a 500-sample batch would take a second
    double s = secondsOf([&] {
      BatchLoader loader(ds, sampler, 500, prefetched(2));
      loader.start(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    CHECK(s < 0.5);
  }
  SUBCASE("never started, or after an error") {
    double s = secondsOf([&] {
      BatchLoader idle(ds, sampler, 16, prefetched(2));
      ds.throw_at_ = sampler.epochOrder(0)[0];
      BatchLoader failed(ds, sampler, 16, prefetched(2));
      failed.start(0);
      Batch b;
      CHECK_THROWS_AS(failed.next(b), DataError);
    });
    CHECK(s < 2.0);
  }
}

TEST_CASE("loader: invalid use is an Error") {
  IndexDataset ds(10);
  Sampler sampler(10, 1, true);
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 0, prefetched(2)), Error);
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 4, prefetched(-1)), Error);
  CHECK_THROWS_AS(BatchLoader(ds, Sampler(11, 1, true), 4, prefetched(2)), Error);
  BatchLoader loader(ds, sampler, 4, prefetched(2));
  Batch b;
  CHECK_THROWS_AS(loader.next(b), Error);
  CHECK_THROWS_AS(loader.start(0, 11), Error);
  CHECK_THROWS_AS(loader.start(0, -1), Error);
  CHECK_THROWS_AS(loader.start(-1), Error);
  loader.start(0, 10);  // resuming at the very end: an empty remainder
  CHECK_FALSE(loader.next(b));
}

TEST_CASE("loader: an empty dataset has no batches") {
  IndexDataset ds(0);
  Sampler sampler(0, 1, true);
  for (int prefetch : {0, 2}) {
    BatchLoader loader(ds, sampler, 4, prefetched(prefetch));
    CHECK(loader.batchesPerEpoch() == 0);
    loader.start(0);
    Batch b;
    CHECK_FALSE(loader.next(b));
  }
}

TEST_CASE("loader threads: the same batches for any thread count, prefetch and resume point") {
  IndexDataset ds(97, Shape{2, 3, 4});
  ds.delay_us_ = 50;  // long enough for the threads to interleave
  Sampler sampler(97, 13, true);
  const auto ref = epoch(ds, sampler, 10, 0, 1);
  REQUIRE(ref.size() == 10);
  for (int threads : {2, 3, 8})
    for (int prefetch : {0, 1, 3}) {
      CAPTURE(threads);
      CAPTURE(prefetch);
      BatchLoader loader(ds, sampler, 10, prefetched(prefetch, Shard{}, threads));
      CHECK(loader.threads() == threads);
      loader.start(1);
      CHECK(drain(loader) == ref);
      loader.start(1, 30);
      CHECK(drain(loader) == std::vector<Copied>(ref.begin() + 3, ref.end()));
    }
  // Ranks with several threads each still make up the global batches.
  BatchLoader r0(ds, sampler, 10, prefetched(2, Shard{0, 2}, 3)),
      r1(ds, sampler, 10, prefetched(2, Shard{1, 2}, 2));
  r0.start(1);
  r1.start(1);
  const auto a = drain(r0), b = drain(r1);
  REQUIRE(a.size() == ref.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    std::vector<float> joined = a[k].pixels;
    joined.insert(joined.end(), b[k].pixels.begin(), b[k].pixels.end());
    CHECK(joined == ref[k].pixels);
  }
  CHECK_THROWS_AS(BatchLoader(ds, sampler, 10, prefetched(2, Shard{}, 0)), Error);
}

TEST_CASE("loader threads: a failing sample surfaces through next() with its message, the lowest first") {
  IndexDataset ds(40);
  Sampler sampler(40, 0, false);  // identity order: samples 11 and 14 are in batch 1
  ds.throw_at_ = 11;
  ds.also_throw_at_ = 14;
  ds.slow_at_ = 11;  // so 14 fails first in time, while 11 is still decoding
  for (int threads : {1, 3, 6})
    for (int prefetch : {0, 2}) {
      CAPTURE(threads);
      CAPTURE(prefetch);
      BatchLoader loader(ds, sampler, 8, prefetched(prefetch, Shard{}, threads));
      loader.start(0);
      Batch b;
      REQUIRE(loader.next(b));  // batch 0 is whole
      CHECK_THROWS_WITH_AS(loader.next(b), "sample 11 is broken", DataError);
      CHECK_THROWS_WITH_AS(loader.next(b), "sample 11 is broken", DataError);
      loader.start(0, 16);  // past both: recovers
      CHECK(drain(loader).size() == 3);
    }
}

TEST_CASE("loader threads: the destructor does not wait for a slow batch") {
  IndexDataset ds(1000, Shape{1, 8, 8});
  ds.delay_us_ = 2000;  // 2 ms a sample: 500 samples on 4 threads take a quarter second
  Sampler sampler(1000, 1, true);
  double s = secondsOf([&] {
    BatchLoader loader(ds, sampler, 500, prefetched(2, Shard{}, 4));
    loader.start(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  CHECK(s < 0.15);
  s = secondsOf([&] {
    BatchLoader loader(ds, sampler, 500, prefetched(2, Shard{}, 4));
    loader.start(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    loader.start(1);  // cancels the batch in progress
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  CHECK(s < 0.15);
}

// Samples that wait (as on a slow disk) rather than compute, so the speed-up
// shows whatever else the machine is doing.
TEST_CASE("loader threads: a batch's samples are prepared in parallel") {
  IndexDataset ds(128, Shape{1, 2, 2});
  ds.delay_us_ = 2000;
  Sampler sampler(128, 1, true);
  auto timeEpoch = [&](int threads) {
    return secondsOf([&] {
      BatchLoader loader(ds, sampler, 32, prefetched(1, Shard{}, threads));
      loader.start(0);
      CHECK(drain(loader).size() == 4);
    });
  };
  const double one = timeEpoch(1), four = timeEpoch(4);
  MESSAGE("128 samples of 2 ms: " << one << " s on 1 thread, " << four << " s on 4");
  CHECK(one > 0.25);
  CHECK(four < 0.6 * one);
}
