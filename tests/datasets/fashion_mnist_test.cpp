#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

#include "datasets/batch_loader.h"
#include "datasets/dataset.h"
#include "datasets/sampler.h"
#include "tests/datasets/test_loader.h"

using namespace dtrain;
using dtrain::test::prefetched;

TEST_CASE("fashion_mnist: the installed dataset opens with the documented sizes") {
  DataSection d;  // defaults: fashion_mnist in the Debian package's directory
  if (!std::filesystem::is_directory(d.dir)) {
    MESSAGE("skipped: " << d.dir << " not found (install dataset-fashion-mnist to run this test)");
    return;
  }
  auto train = openDataset(d, Split::Train, 42);
  auto test = openDataset(d, Split::Test, 42);
  CHECK(train->describe() == "fashion_mnist train: 60000 x [1,28,28], 10 classes");
  CHECK(test->describe() == "fashion_mnist test: 10000 x [1,28,28], 10 classes");
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(train->sampleShape() == Shape{1, 28, 28});
  CHECK(train->classes() == 10);

  // Labels are balanced (6000 per class) and pixels are in [0,1].
  std::vector<int64_t> per_class(10, 0);
  std::vector<float> px(784);
  float max = 0.0f;
  for (int64_t i = 0; i < train->size(); ++i) {
    int32_t l = train->get(i, px.data());
    REQUIRE(l >= 0);
    REQUIRE(l < 10);
    per_class[static_cast<size_t>(l)]++;
    if (i < 100)
      for (float v : px) max = std::max(max, v);
  }
  for (int64_t c : per_class) CHECK(c == 6000);
  CHECK(max == 1.0f);

  Sampler sampler(train->size(), 42, true);
  BatchLoader loader(*train, sampler, 128, prefetched(2));
  CHECK(loader.batchesPerEpoch() == 469);
  loader.start(0);
  Batch b;
  int64_t n = 0;
  while (loader.next(b)) n += b.size;
  CHECK(n == 60000);
}
