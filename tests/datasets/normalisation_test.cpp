#include "datasets/normalisation.h"

#include <doctest/doctest.h>

#include <vector>

#include "core/errors.h"
#include "datasets/batch_loader.h"
#include "datasets/dataset_info.h"
#include "datasets/loader_options.h"
#include "datasets/sampler.h"
#include "tests/datasets/test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Every pixel of sample i is (i + 1) / 10.
class FlatDataset : public Dataset {
 public:
  FlatDataset(int64_t n, Shape shape) : n_(n), shape_(shape) {}
  std::string describe() const override { return "flat"; }
  int64_t size() const override { return n_; }
  Shape sampleShape() const override { return shape_; }
  int64_t classes() const override { return 2; }
  int32_t get(int64_t index, float* out) const override {
    for (int64_t p = 0; p < shape_.numel(); ++p) out[p] = static_cast<float>(index + 1) / 10.0f;
    return 0;
  }

 private:
  int64_t n_;
  Shape shape_;
};

}  // namespace

TEST_CASE("normalisation: (x - mean) / std per channel") {
  const Normalisation n({0.5f, 0.25f, 0.0f}, {0.5f, 2.0f, 0.1f});
  std::vector<float> v = {1.0f, 0.0f, 0.25f, 0.75f, 0.3f, 0.9f};  // 3 channels of 2
  n.apply(v.data(), 2);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -1.0f);
  CHECK(v[2] == 0.0f);
  CHECK(v[3] == 0.25f);
  CHECK(v[4] == (0.3f - 0.0f) / 0.1f);
  CHECK(v[5] == 0.9f / 0.1f);
}

TEST_CASE("normalisation from [data]: one value for all channels, one per channel, or none") {
  DataSection d;
  CHECK_FALSE(Normalisation::fromConfig(d, 3).active());
  d.mean = {0.5};
  d.std = {0.25};
  Normalisation one = Normalisation::fromConfig(d, 3);
  CHECK(one.mean() == std::vector<float>{0.5f, 0.5f, 0.5f});
  CHECK(one.std() == std::vector<float>{0.25f, 0.25f, 0.25f});
  d.mean = {0.485, 0.456, 0.406};
  d.std = {};
  Normalisation per = Normalisation::fromConfig(d, 3);
  CHECK(per.mean() == std::vector<float>{0.485f, 0.456f, 0.406f});
  CHECK(per.std() == std::vector<float>{1.0f, 1.0f, 1.0f});
  // Lengths that fit neither: one line naming the key.
  std::string msg = messageOf<ConfigError>([&] { Normalisation::fromConfig(d, 1); });
  CHECK(contains(msg, "[data] mean has 3 values but the samples have 1 channel"));
  d.mean = {};
  d.std = {0.2, 0.3};
  msg = messageOf<ConfigError>([&] { Normalisation::fromConfig(d, 3); });
  CHECK(contains(msg, "[data] std has 2 values"));
  d.std = {0.0};
  CHECK_THROWS_AS(Normalisation::fromConfig(d, 3), ConfigError);
}

TEST_CASE("normalisation in the loader: training and evaluation batches, of any dataset") {
  FlatDataset ds(6, Shape{2, 2, 2});
  Sampler sampler(6, 1, false);
  DataSection d;
  d.mean = {0.1, 0.2};
  d.std = {0.5, 0.25};
  d.augment_flip = true;  // flat samples: a flip changes nothing
  for (Split split : {Split::Train, Split::Test}) {
    const LoaderOptions o = loaderOptionsFor(d, ds, split, 3, Shard{}, false);
    CHECK(o.augmentation.active() == (split == Split::Train));
    CHECK(o.threads == 1);  // in memory: one thread unless asked
    BatchLoader loader(ds, sampler, 6, o);
    loader.start(0);
    Batch b;
    REQUIRE(loader.next(b));
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t p = 0; p < 4; ++p) {
          const float x = static_cast<float>(i + 1) / 10.0f;
          const float expect = c == 0 ? (x - 0.1f) / 0.5f : (x - 0.2f) / 0.25f;
          REQUIRE(b.images.data()[(i * 2 + c) * 4 + p] == expect);
        }
  }
  // mean/std for another channel count: a ConfigError naming them.
  d.mean = {0.1, 0.2, 0.3};
  CHECK(contains(messageOf<ConfigError>([&] { loaderOptionsFor(d, ds, Split::Test, 3, Shard{}, false); }),
                 "[data] mean has 3 values"));
  LoaderOptions o;
  o.normalisation = Normalisation({0.1f, 0.2f, 0.3f}, {1.0f, 1.0f, 1.0f});
  CHECK(contains(messageOf<ConfigError>([&] { BatchLoader(ds, sampler, 2, o); }), "[data] mean/std"));
  d.mean = {};
  d.loader_threads = 4;
  CHECK(loaderOptionsFor(d, ds, Split::Test, 3, Shard{}, false).threads == 4);
}

TEST_CASE("normalisation: `dtrain check` (peekDataset) reports mean/std that do not fit the channels") {
  DataSection d;
  d.dataset = "synthetic";
  d.shape = {2, 4, 4};
  d.mean = {0.5, 0.5};
  CHECK(peekDataset(d).sample_shape == Shape{2, 4, 4});
  d.mean = {0.5, 0.5, 0.5};
  CHECK(contains(messageOf<ConfigError>([&] { peekDataset(d); }), "[data] mean has 3 values"));
}
