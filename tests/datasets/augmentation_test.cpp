#include "datasets/augmentation.h"

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "datasets/batch_loader.h"
#include "datasets/image_folder_dataset.h"
#include "datasets/image_ops.h"
#include "datasets/loader_options.h"
#include "datasets/sampler.h"
#include "tests/datasets/image_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Sample i: pixel p of channel c is i + c * 0.25 + p / 1000 (every value distinct).
class PatternDataset : public Dataset {
 public:
  PatternDataset(int64_t n, Shape shape) : n_(n), shape_(shape) {}
  std::string describe() const override { return "pattern"; }
  int64_t size() const override { return n_; }
  Shape sampleShape() const override { return shape_; }
  int64_t classes() const override { return 3; }
  int32_t get(int64_t index, float* out) const override {
    const int64_t plane = shape_[1] * shape_[2];
    for (int64_t c = 0; c < shape_[0]; ++c)
      for (int64_t p = 0; p < plane; ++p)
        out[c * plane + p] =
            static_cast<float>(index) + 0.25f * static_cast<float>(c) + static_cast<float>(p) / 1000.0f;
    return static_cast<int32_t>(index % 3);
  }

 private:
  int64_t n_;
  Shape shape_;
};

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

std::vector<float> augmented(const Dataset& ds, const Augmentation& a, int64_t index, uint64_t draw) {
  std::vector<float> out(static_cast<size_t>(ds.sampleShape().numel()));
  ds.getAugmented(index, a, draw, out.data());
  return out;
}

Augmentation withOptions(bool flip, int64_t padding, bool resized_crop = false) {
  AugmentationOptions o;
  o.flip = flip;
  o.crop_padding = padding;
  o.resized_crop = resized_crop;
  return Augmentation(o);
}

// Every batch of one epoch, copied.
std::vector<std::vector<float>> epochBatches(const Dataset& ds, const Sampler& s, int64_t batch,
                                             LoaderOptions o, int64_t epoch, int64_t position = 0) {
  BatchLoader loader(ds, s, batch, o);
  loader.start(epoch, position);
  std::vector<std::vector<float>> out;
  Batch b;
  while (loader.next(b)) out.emplace_back(b.images.data(), b.images.data() + b.images.numel());
  return out;
}

}  // namespace

TEST_CASE("image ops: flip twice is the identity, once mirrors each row") {
  const std::vector<float> original = ramp(2 * 3 * 5);
  std::vector<float> v = original;
  flipHorizontal(v.data(), 2, 3, 5);
  CHECK(v != original);
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t x = 0; x < 5; ++x)
      CHECK(v[static_cast<size_t>(row * 5 + x)] == original[static_cast<size_t>(row * 5 + 4 - x)]);
  flipHorizontal(v.data(), 2, 3, 5);
  CHECK(v == original);
}

TEST_CASE("image ops: translation moves content and fills with zeros") {
  const int64_t C = 2, H = 4, W = 5;
  const std::vector<float> src = ramp(C * H * W);
  for (int64_t sy = -5; sy <= 5; ++sy)
    for (int64_t sx = -6; sx <= 6; ++sx) {
      std::vector<float> dst(src.size(), -1.0f);
      translateWithZeros(src.data(), dst.data(), C, H, W, sy, sx);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const int64_t fy = y - sy, fx = x - sx;
            const float expect = fy >= 0 && fy < H && fx >= 0 && fx < W
                                     ? src[static_cast<size_t>((c * H + fy) * W + fx)]
                                     : 0.0f;
            REQUIRE(dst[static_cast<size_t>((c * H + y) * W + x)] == expect);
          }
    }
}

TEST_CASE("image ops: bilinear crop-and-resize") {
  const int64_t H = 4, W = 6;
  const std::vector<float> src = ramp(H * W);
  std::vector<float> out(static_cast<size_t>(H * W));
  // The whole image at its own size: a copy.
  cropResizeBilinear(src.data(), 1, H, W, CropWindow{0, 0, H, W}, out.data(), H, W);
  CHECK(out == src);
  // A 1-row, 2-column window stretched to 1 x 4: pixel centres aligned, edges clamped.
  std::vector<float> wide(4);
  cropResizeBilinear(src.data(), 1, H, W, CropWindow{2, 3, 1, 2}, wide.data(), 1, 4);
  const float a = src[2 * W + 3], b = src[2 * W + 4];
  CHECK(wide[0] == a);
  CHECK(wide[1] == doctest::Approx(a + 0.25f * (b - a)));
  CHECK(wide[2] == doctest::Approx(a + 0.75f * (b - a)));
  CHECK(wide[3] == b);
  // A flat window stays flat.
  const std::vector<float> flat(static_cast<size_t>(3 * H * W), 0.5f);
  std::vector<float> flat_out(static_cast<size_t>(3 * 7 * 9));
  cropResizeBilinear(flat.data(), 3, H, W, CropWindow{1, 1, 2, 3}, flat_out.data(), 7, 9);
  for (float v : flat_out) CHECK(v == 0.5f);
}

TEST_CASE("augmentation: crop padding keeps the shape and moves content by the drawn offset") {
  PatternDataset ds(4, Shape{2, 6, 7});
  const Augmentation a = withOptions(false, 3);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t index = 0; index < 4; ++index)
    for (int64_t epoch = 0; epoch < 20; ++epoch) {
      const uint64_t draw = Augmentation::sampleDraw(9, epoch, index);
      const auto [dy, dx] = a.paddedCropOffset(draw);
      REQUIRE(dy >= 0);
      REQUIRE(dy <= 6);
      REQUIRE(dx >= 0);
      REQUIRE(dx <= 6);
      offsets.insert({dy, dx});
      std::vector<float> plain(static_cast<size_t>(2 * 6 * 7)), expect(plain.size());
      ds.get(index, plain.data());
      translateWithZeros(plain.data(), expect.data(), 2, 6, 7, 3 - dy, 3 - dx);
      REQUIRE(augmented(ds, a, index, draw) == expect);
    }
  CHECK(offsets.size() > 20);  // of 49 possible
  CHECK_FALSE(a.flips(Augmentation::sampleDraw(9, 0, 0)));
}

TEST_CASE("augmentation: flips about half the samples, exactly a mirror") {
  PatternDataset ds(1, Shape{3, 4, 5});
  const Augmentation a = withOptions(true, 0);
  std::vector<float> plain(60), mirrored(60);
  ds.get(0, plain.data());
  mirrored = plain;
  flipHorizontal(mirrored.data(), 3, 4, 5);
  int flipped = 0;
  for (int64_t epoch = 0; epoch < 1000; ++epoch) {
    const uint64_t draw = Augmentation::sampleDraw(3, epoch, 0);
    const bool flips = a.flips(draw);
    flipped += flips;
    REQUIRE(augmented(ds, a, 0, draw) == (flips ? mirrored : plain));
  }
  CHECK(flipped > 430);
  CHECK(flipped < 570);
}

TEST_CASE("augmentation: the same (seed, epoch, index) gives the same sample; another epoch another one") {
  PatternDataset ds(8, Shape{3, 8, 8});
  AugmentationOptions o;
  o.flip = true;
  o.crop_padding = 2;
  o.resized_crop = true;
  const Augmentation a(o);
  int differing = 0;
  for (int64_t index = 0; index < 8; ++index) {
    const auto first = augmented(ds, a, index, Augmentation::sampleDraw(1, 0, index));
    CHECK(augmented(ds, a, index, Augmentation::sampleDraw(1, 0, index)) == first);
    differing += augmented(ds, a, index, Augmentation::sampleDraw(1, 1, index)) != first;
  }
  CHECK(differing >= 7);
  CHECK(Augmentation::sampleDraw(1, 0, 0) != Augmentation::sampleDraw(2, 0, 0));
  CHECK(Augmentation::sampleDraw(1, 0, 1) != Augmentation::sampleDraw(1, 1, 0));
}

TEST_CASE("augmentation: resized crop windows follow the scale and ratio, with a centre-crop fallback") {
  AugmentationOptions o;
  o.resized_crop = true;
  o.scale_min = 0.2;
  o.scale_max = 0.6;
  o.ratio_min = 0.5;
  o.ratio_max = 2.0;
  const Augmentation a(o);
  const int64_t H = 120, W = 160;
  std::set<int64_t> tops;
  for (int64_t i = 0; i < 300; ++i) {
    const CropWindow w = a.resizedCropWindow(Augmentation::sampleDraw(4, 0, i), H, W);
    REQUIRE(w.top >= 0);
    REQUIRE(w.left >= 0);
    REQUIRE(w.top + w.height <= H);
    REQUIRE(w.left + w.width <= W);
    const double area = static_cast<double>(w.height * w.width) / static_cast<double>(H * W);
    CHECK(area > 0.19);
    CHECK(area < 0.62);
    const double ratio = static_cast<double>(w.width) / static_cast<double>(w.height);
    CHECK(ratio > 0.48);
    CHECK(ratio < 2.05);
    tops.insert(w.top);
  }
  CHECK(tops.size() > 20);
  // Off: the whole image.
  CHECK(withOptions(true, 0).resizedCropWindow(77, H, W) == CropWindow{0, 0, H, W});
  // No window of the whole area with aspect 2..3 fits a square: the centre
  // crop of aspect 2 is taken (torchvision's fallback).
  o.scale_min = o.scale_max = 1.0;
  o.ratio_min = 2.0;
  o.ratio_max = 3.0;
  CHECK(Augmentation(o).resizedCropWindow(5, 40, 40) == CropWindow{10, 0, 20, 40});
  o.ratio_min = 0.25;
  o.ratio_max = 0.5;
  CHECK(Augmentation(o).resizedCropWindow(5, 40, 40) == CropWindow{0, 10, 40, 20});
}

TEST_CASE("augmentation: out-of-range options are ConfigErrors naming the key") {
  AugmentationOptions o;
  o.crop_padding = -1;
  CHECK(contains(messageOf<ConfigError>([&] { Augmentation{o}; }), "augment_crop_padding"));
  o = {};
  o.scale_min = 0.9;
  o.scale_max = 0.5;
  CHECK(contains(messageOf<ConfigError>([&] { Augmentation{o}; }), "augment_scale"));
  o = {};
  o.ratio_min = 0;
  CHECK(contains(messageOf<ConfigError>([&] { Augmentation{o}; }), "augment_ratio"));
  DataSection d;
  d.augment_resized_crop = true;
  d.augment_scale = {0.5};
  CHECK(contains(messageOf<ConfigError>([&] { Augmentation::fromConfig(d); }), "augment_scale"));
  CHECK_FALSE(Augmentation::fromConfig(DataSection{}).active());
}

TEST_CASE("augmentation: an image folder crops the decoded original") {
  TempDir tmp("imgaug");
  const Pixels p = patternImage(20, 10, 3, 4);
  writePng(tmp / "data/a/0.png", p);
  writePng(tmp / "data/a/1.png", patternImage(30, 30, 3, 5));
  DataSection d;
  d.dataset = "image_folder";
  d.dir = d.validation_dir = tmp / "data";
  d.image_size = {10, 20};
  ImageFolderDataset ds(d, Split::Train);
  std::vector<float> plain(static_cast<size_t>(3 * 10 * 20));
  ds.get(0, plain.data());
  // Scale 1 at the image's own aspect: the window is the whole image.
  AugmentationOptions o;
  o.resized_crop = true;
  o.scale_min = o.scale_max = 1.0;
  o.ratio_min = o.ratio_max = 2.0;
  CHECK(augmented(ds, Augmentation(o), 0, 123) == plain);
  // A quarter of the area: the window of the original, resized once.
  o.scale_min = o.scale_max = 0.25;
  o.ratio_min = o.ratio_max = 1.0;
  o.flip = true;
  const Augmentation a(o);
  int flipped = 0;
  for (uint64_t draw = 0; draw < 6; ++draw) {
    const DecodedImage image = decodeImageFile(ds.files()[1].path, 3);
    const CropWindow w = a.resizedCropWindow(draw, 30, 30);
    CHECK(w.height == 15);
    CHECK(w.width == 15);
    std::vector<float> expect(plain.size());
    resizeToFloats(image, w, 10, 20, expect.data());
    if (a.flips(draw)) flipHorizontal(expect.data(), 3, 10, 20);
    flipped += a.flips(draw);
    CHECK(augmented(ds, a, 1, draw) == expect);
  }
  CHECK(flipped > 0);
  CHECK(flipped < 6);
}

TEST_CASE("augmentation in the loader: independent of threads and of resume") {
  PatternDataset ds(45, Shape{3, 8, 8});
  Sampler sampler(45, 7, true);
  LoaderOptions o;
  o.prefetch = 2;
  o.seed = 11;
  AugmentationOptions ao;
  ao.flip = true;
  ao.crop_padding = 2;
  ao.resized_crop = true;
  o.augmentation = Augmentation(ao);
  o.threads = 1;
  const auto ref = epochBatches(ds, sampler, 8, o, 3);
  REQUIRE(ref.size() == 6);
  o.threads = 3;
  CHECK(epochBatches(ds, sampler, 8, o, 3) == ref);
  o.prefetch = 0;
  CHECK(epochBatches(ds, sampler, 8, o, 3) == ref);
  // Resumed after two batches: the rest, bit for bit.
  o.prefetch = 2;
  const auto rest = epochBatches(ds, sampler, 8, o, 3, 16);
  CHECK(rest == std::vector<std::vector<float>>(ref.begin() + 2, ref.end()));
  // The augmentation is live: another epoch, another seed, or none differs.
  CHECK(epochBatches(ds, Sampler(45, 7, false), 8, o, 3) != epochBatches(ds, Sampler(45, 7, false), 8, o, 4));
  LoaderOptions other = o;
  other.seed = 12;
  CHECK(epochBatches(ds, sampler, 8, other, 3) != ref);
  other.augmentation = Augmentation();
  CHECK(epochBatches(ds, sampler, 8, other, 3) != ref);
}
