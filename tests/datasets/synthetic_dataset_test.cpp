#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"
#include "datasets/dataset.h"
#include "test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {
DataSection synthetic(int64_t train, int64_t test, std::vector<int64_t> shape, int64_t classes) {
  DataSection d;
  d.dataset = "synthetic";
  d.train_samples = train;
  d.test_samples = test;
  d.shape = std::move(shape);
  d.classes = classes;
  return d;
}

std::vector<float> all(const Dataset& ds, std::vector<int32_t>* labels = nullptr) {
  const int64_t n = ds.sampleShape().numel();
  std::vector<float> out(static_cast<size_t>(ds.size() * n));
  for (int64_t i = 0; i < ds.size(); ++i) {
    int32_t l = ds.get(i, out.data() + i * n);
    if (labels) labels->push_back(l);
  }
  return out;
}
}  // namespace

TEST_CASE("synthetic: sizes, shape, classes and value range") {
  auto d = synthetic(300, 50, {2, 9, 7}, 4);
  auto train = openDataset(d, Split::Train, 7);
  auto test = openDataset(d, Split::Test, 7);
  CHECK(train->size() == 300);
  CHECK(test->size() == 50);
  CHECK(train->sampleShape() == Shape{2, 9, 7});
  CHECK(train->classes() == 4);
  CHECK(train->describe() == "synthetic train: 300 x [2,9,7], 4 classes");
  CHECK(test->describe() == "synthetic test: 50 x [2,9,7], 4 classes");
  std::vector<int32_t> labels;
  auto px = all(*train, &labels);
  CHECK(*std::min_element(px.begin(), px.end()) >= 0.0f);
  CHECK(*std::max_element(px.begin(), px.end()) <= 1.0f);
  for (int c = 0; c < 4; ++c) CHECK(std::count(labels.begin(), labels.end(), c) > 30);  // every class present
}

TEST_CASE("synthetic: deterministic per seed; seeds and splits differ") {
  auto d = synthetic(100, 100, {1, 12, 12}, 5);
  std::vector<int32_t> la, lb, lc, lt;
  auto a = all(*openDataset(d, Split::Train, 42), &la);
  auto b = all(*openDataset(d, Split::Train, 42), &lb);
  auto c = all(*openDataset(d, Split::Train, 43), &lc);
  auto t = all(*openDataset(d, Split::Test, 42), &lt);
  CHECK(a == b);
  CHECK(la == lb);
  CHECK(a != c);
  CHECK(a != t);
  // Sample i does not depend on how many samples are generated.
  auto d2 = synthetic(10, 100, {1, 12, 12}, 5);
  auto short_run = all(*openDataset(d2, Split::Train, 42));
  CHECK(std::equal(short_run.begin(), short_run.end(), a.begin()));
}

TEST_CASE("synthetic: learnable, and the test split shares the train split's classes") {
  // A nearest-class-mean classifier fitted on train must do far better than
  // chance on test: the classes are real and shared between splits.
  const int64_t classes = 6;
  auto d = synthetic(600, 300, {1, 16, 16}, classes);
  auto train = openDataset(d, Split::Train, 3);
  auto test = openDataset(d, Split::Test, 3);
  const int64_t n = 256;
  std::vector<double> means(static_cast<size_t>(classes * n), 0.0);
  std::vector<int64_t> counts(static_cast<size_t>(classes), 0);
  std::vector<float> px(static_cast<size_t>(n));
  for (int64_t i = 0; i < train->size(); ++i) {
    int32_t l = train->get(i, px.data());
    counts[static_cast<size_t>(l)]++;
    for (int64_t p = 0; p < n; ++p) means[static_cast<size_t>(l * n + p)] += px[static_cast<size_t>(p)];
  }
  for (int64_t k = 0; k < classes; ++k)
    for (int64_t p = 0; p < n; ++p) means[static_cast<size_t>(k * n + p)] /= std::max<int64_t>(1, counts[k]);
  int64_t correct = 0;
  for (int64_t i = 0; i < test->size(); ++i) {
    int32_t l = test->get(i, px.data());
    int64_t best = -1;
    double best_d = 1e300;
    for (int64_t k = 0; k < classes; ++k) {
      double dist = 0;
      for (int64_t p = 0; p < n; ++p) {
        double e = px[static_cast<size_t>(p)] - means[static_cast<size_t>(k * n + p)];
        dist += e * e;
      }
      if (dist < best_d) best_d = dist, best = k;
    }
    correct += best == l;
  }
  double acc = static_cast<double>(correct) / static_cast<double>(test->size());
  MESSAGE("nearest-mean test accuracy on synthetic data: " << acc);
  CHECK(acc > 0.7);
}

TEST_CASE("synthetic: invalid sections are ConfigErrors") {
  CHECK_THROWS_AS(openDataset(synthetic(10, 10, {28, 28}, 10), Split::Train, 1), ConfigError);
  CHECK_THROWS_AS(openDataset(synthetic(10, 10, {1, 0, 28}, 10), Split::Train, 1), ConfigError);
  CHECK_THROWS_AS(openDataset(synthetic(10, 10, {1, 28, 28}, 0), Split::Train, 1), ConfigError);
  CHECK_THROWS_AS(openDataset(synthetic(-1, 10, {1, 28, 28}, 10), Split::Train, 1), ConfigError);
  CHECK_THROWS_AS(openDataset(synthetic(10, -1, {1, 28, 28}, 10), Split::Test, 1), ConfigError);
  CHECK_THROWS_AS(openDataset(synthetic(int64_t{1} << 40, 10, {3, 256, 256}, 10), Split::Train, 1),
                  ConfigError);
  // An empty split is allowed (no test set).
  CHECK(openDataset(synthetic(10, 0, {1, 4, 4}, 2), Split::Test, 1)->size() == 0);
}
