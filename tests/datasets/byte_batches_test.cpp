// Byte batches (datasets/byte_batches.h, core/backend/byte_batch.h): a GPU
// run's loader hands out bytes and augmentation draws, or only indices into
// the training split kept on the device, and the device makes the floats.
// Here the device's arithmetic runs on the CPU (the same inline functions the
// kernel calls) and must give the float loader's batches bit for bit.
#include "datasets/byte_batches.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/util/rng.h"
#include "datasets/batch_loader.h"
#include "datasets/byte_images.h"
#include "datasets/sampler.h"
#include "tests/common/bytes_dataset.h"

using namespace dtrain;
using dtrain::testing::BytesDataset;

namespace {

// Floats, not bytes: what a dataset decoding files is to the byte path.
class FloatDataset : public Dataset {
 public:
  std::string describe() const override { return "floats"; }
  int64_t size() const override { return 4; }
  Shape sampleShape() const override { return Shape{1, 4, 4}; }
  int64_t classes() const override { return 2; }
  int32_t get(int64_t, float* out) const override {
    for (int i = 0; i < 16; ++i) out[i] = 0.5f;
    return 0;
  }
};

Augmentation augmentation(bool flip, int64_t padding, bool resized_crop = false) {
  AugmentationOptions o;
  o.flip = flip;
  o.crop_padding = padding;
  o.resized_crop = resized_crop;
  return Augmentation(o);
}

LoaderOptions options(const Augmentation& a, Normalisation n, int prefetch, int threads, Shard shard) {
  LoaderOptions o;
  o.prefetch = prefetch;
  o.threads = threads;
  o.shard = shard;
  o.augmentation = a;
  o.normalisation = std::move(n);
  o.seed = 42;
  return o;
}

struct Counts {
  int64_t batches = 0, flipped = 0, moved = 0;
};

// Every batch from `position` of `epoch` on, through the float path and
// through `form` converted by the device's arithmetic on the CPU: the same
// bits, labels, sizes and positions.
Counts compareEpoch(const Dataset& ds, const LoaderOptions& floats, BatchForm form, int64_t batch,
                    int64_t epoch, int64_t position) {
  const Sampler sampler(ds.size(), 9, true);
  LoaderOptions in_bytes = floats;
  in_bytes.form = form;
  BatchLoader a(ds, sampler, batch, floats), b(ds, sampler, batch, in_bytes);
  a.start(epoch, position);
  b.start(epoch, position);
  const Shape shape = ds.sampleShape();
  ByteBatchLayout layout{shape[0], shape[1], shape[2], nullptr, nullptr};
  if (floats.normalisation.active()) {
    layout.mean = floats.normalisation.mean().data();
    layout.std = floats.normalisation.std().data();
  }
  Counts counts;
  Batch fa, fb;
  while (a.next(fa)) {
    REQUIRE(b.next(fb));
    CHECK(fb.form == form);
    CHECK(fb.images.data() == nullptr);
    REQUIRE(fb.size == fa.size);
    CHECK(fb.global_size == fa.global_size);
    CHECK(fb.global_offset == fa.global_offset);
    CHECK(fb.labels == fa.labels);
    CHECK((fb.bytes.pixels != nullptr) == (form == BatchForm::Bytes));
    const uint8_t* pixels = form == BatchForm::Bytes ? fb.bytes.pixels : ds.byteImages()->pixels();
    std::vector<float> made(static_cast<size_t>(fa.size * shape.numel()), -7.0f);
    byteBatchToFloats(pixels, fb.bytes.transforms, fb.size, layout, made.data());
    REQUIRE(std::memcmp(made.data(), fa.images.data(), made.size() * sizeof(float)) == 0);
    for (int64_t i = 0; i < fb.size; ++i) {
      counts.flipped += fb.bytes.transforms[i].flip;
      counts.moved += fb.bytes.transforms[i].shift_y != 0 || fb.bytes.transforms[i].shift_x != 0;
    }
    ++counts.batches;
    CHECK(b.position() == a.position());
  }
  CHECK_FALSE(b.next(fb));
  return counts;
}

}  // namespace

TEST_CASE(
    "byte batches: the device's arithmetic gives the float loader's batches bit for bit "
    "(Fashion-MNIST-like)") {
  const BytesDataset ds(203, Shape{1, 28, 28}, 5);
  const Normalisation fashion({0.2860f}, {0.3530f});
  for (BatchForm form : {BatchForm::Bytes, BatchForm::Indices})
    for (int prefetch : {0, 2})
      for (int threads : {1, 3}) {
        CAPTURE(static_cast<int>(form));
        CAPTURE(prefetch);
        CAPTURE(threads);
        const LoaderOptions o = options(augmentation(true, 4), fashion, prefetch, threads, Shard{});
        const Counts c = compareEpoch(ds, o, form, 64, 0, 0);
        CHECK(c.batches == 4);  // the last one partial
        CHECK(c.flipped > 60);  // about half of 203
        CHECK(c.flipped < 143);
        CHECK(c.moved > 150);  // 1 in 81 stays put
      }
  // Later epochs draw again; a resumed loader and each rank's slice see the same.
  const LoaderOptions o = options(augmentation(true, 4), fashion, 2, 1, Shard{});
  compareEpoch(ds, o, BatchForm::Bytes, 64, 3, 0);
  compareEpoch(ds, o, BatchForm::Indices, 64, 3, 128);
  for (int rank : {0, 1}) {
    const LoaderOptions sliced = options(augmentation(true, 4), fashion, 2, 1, Shard{rank, 2});
    compareEpoch(ds, sliced, BatchForm::Bytes, 64, 1, 64);
  }
}

TEST_CASE("byte batches: CIFAR-like colour images, per-channel normalisation, each transform alone or none") {
  const BytesDataset ds(50, Shape{3, 32, 32}, 8);
  const Normalisation cifar({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
  struct Case {
    bool flip;
    int64_t padding;
    bool normalised;
  };
  for (const Case k : {Case{true, 4, true}, Case{false, 4, true}, Case{true, 0, true}, Case{false, 0, false},
                       Case{true, 40, false}})  // a padding wider than the image moves some samples out whole
    for (BatchForm form : {BatchForm::Bytes, BatchForm::Indices}) {
      CAPTURE(k.flip);
      CAPTURE(k.padding);
      const Counts c = compareEpoch(
          ds, options(augmentation(k.flip, k.padding), k.normalised ? cifar : Normalisation(), 2, 2, Shard{}),
          form, 16, 2, 0);
      CHECK(c.batches == 4);
      if (!k.flip) CHECK(c.flipped == 0);
      if (k.padding == 0) CHECK(c.moved == 0);
    }
}

TEST_CASE("byte batches: a sample's transform is the float path's draws") {
  const Augmentation a = augmentation(true, 3);
  for (uint64_t draw : {uint64_t{1}, uint64_t{77}, uint64_t{123456789}}) {
    const SampleTransform t = sampleTransformOf(a, draw, 11);
    CHECK(t.source == 11);
    const auto [dy, dx] = a.paddedCropOffset(draw);
    CHECK(t.shift_y == 3 - dy);
    CHECK(t.shift_x == 3 - dx);
    CHECK(t.flip == (a.flips(draw) ? 1 : 0));
  }
  const SampleTransform none = sampleTransformOf(Augmentation(), 99, 2);
  CHECK(none.shift_y == 0);
  CHECK(none.shift_x == 0);
  CHECK(none.flip == 0);
}

TEST_CASE("byte batches are refused for float datasets and the resized crop, which keep the float path") {
  const BytesDataset bytes(8, Shape{1, 6, 6}, 1);
  const FloatDataset floats;
  CHECK(byteBatchesRefusal(bytes, augmentation(true, 2)).empty());
  CHECK(byteBatchesRefusal(floats, Augmentation()) ==
        "the dataset's images are decoded from files into floats");
  CHECK(byteBatchesRefusal(bytes, augmentation(true, 0, true)) ==
        "augment_resized_crop runs on the CPU's floats");
  const Sampler sampler(4, 1, false);
  LoaderOptions o;
  o.form = BatchForm::Bytes;
  CHECK_THROWS_AS(BatchLoader(floats, sampler, 2, o), Error);
}

TEST_CASE("device cache: the budget is a quarter of free GPU memory by default, 0 is off, else MiB") {
  CHECK(deviceCacheBudget(-1, int64_t{4} << 30) == int64_t{1} << 30);
  CHECK(deviceCacheBudget(-1, 0) == 0);
  CHECK(deviceCacheBudget(0, int64_t{80} << 30) == 0);
  CHECK(deviceCacheBudget(3, 0) == int64_t{3} << 20);
}

TEST_CASE("device cache: the training split stays on the GPU when its bytes fit the budget") {
  const BytesDataset ds(100, Shape{1, 28, 28}, 3);  // 78400 bytes
  DataSection data;
  const Augmentation flip = augmentation(true, 0);
  GpuBatchPlan plan = planGpuBatches(data, ds, flip, int64_t{1} << 30);
  CHECK(plan.form == BatchForm::Indices);
  CHECK(plan.description ==
        "the training split (0.1 MiB of bytes) is kept on the GPU: each step sends its sample indices");
  CHECK(planGpuBatches(data, ds, flip, 4 * 78400).form == BatchForm::Indices);    // exactly fits
  CHECK(planGpuBatches(data, ds, flip, 4 * 78400 - 4).form == BatchForm::Bytes);  // a byte short
  const BytesDataset larger(2000, Shape{1, 28, 28}, 4);                           // 1.5 MiB
  plan = planGpuBatches(data, larger, flip, int64_t{4} << 20);
  CHECK(plan.form == BatchForm::Bytes);
  CHECK(plan.description ==
        "training batches cross to the GPU as bytes (1.5 MiB exceed the device cache's 1.0 MiB)");
  data.device_cache_mb = 0;
  plan = planGpuBatches(data, ds, flip, int64_t{1} << 30);
  CHECK(plan.form == BatchForm::Bytes);
  CHECK(plan.description == "training batches cross to the GPU as bytes (device_cache_mb = 0)");
  data.device_cache_mb = 1;  // a size of its own: free memory does not matter
  CHECK(planGpuBatches(data, ds, flip, 0).form == BatchForm::Indices);
  plan = planGpuBatches(data, ds, augmentation(true, 0, true), int64_t{1} << 30);
  CHECK(plan.form == BatchForm::Floats);
  CHECK(plan.description ==
        "training batches cross to the GPU as floats (augment_resized_crop runs on the CPU's floats)");
}
