#include "datasets/idx_dataset.h"

#include <doctest/doctest.h>

#include "core/errors.h"
#include "datasets/dataset.h"
#include "test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {
DataSection idxSection(const std::string& dir, const std::string& kind = "idx") {
  DataSection d;
  d.dataset = kind;
  d.dir = dir;
  return d;
}
}  // namespace

TEST_CASE("idx dataset: raw and gzip splits load with exact pixels and labels") {
  for (bool gzip : {false, true}) {
    CAPTURE(gzip);
    TempDir dir;
    writeSplit(dir.str(), "train", 12, 5, 4, 3, gzip);
    writeSplit(dir.str(), "t10k", 7, 5, 4, 3, gzip);
    auto train = openDataset(idxSection(dir.str()), Split::Train, 1);
    auto test = openDataset(idxSection(dir.str()), Split::Test, 1);
    CHECK(train->size() == 12);
    CHECK(test->size() == 7);
    CHECK(train->sampleShape() == Shape{1, 5, 4});
    CHECK(train->classes() == 3);
    CHECK(test->classes() == 3);
    CHECK(train->describe() == "idx train: 12 x [1,5,4], 3 classes");
    CHECK(test->describe() == "idx test: 7 x [1,5,4], 3 classes");
    std::vector<float> px(20);
    for (int64_t i = 0; i < train->size(); ++i) {
      CHECK(train->get(i, px.data()) == i % 3);
      for (int64_t p = 0; p < 20; ++p) CHECK(px[static_cast<size_t>(p)] == pixelOf(i, p) / 255.0f);
    }
    CHECK_THROWS_AS(train->get(12, px.data()), Error);
    CHECK_THROWS_AS(train->get(-1, px.data()), Error);
  }
}

TEST_CASE("idx dataset: the raw file is preferred when both exist") {
  TempDir dir;
  writeSplit(dir.str(), "train", 4, 2, 2, 2, false);
  // A broken .gz next to a good raw file is never opened.
  writeBytes(dir.file("train-images-idx3-ubyte.gz"), {1, 2, 3});
  auto ds = openDataset(idxSection(dir.str()), Split::Train, 1);
  CHECK(ds->size() == 4);
}

TEST_CASE("idx dataset: fashion_mnist has 10 classes and rejects larger labels") {
  TempDir dir;
  writeSplit(dir.str(), "train", 6, 3, 3, 4, false);
  auto ds = openDataset(idxSection(dir.str(), "fashion_mnist"), Split::Train, 1);
  CHECK(ds->classes() == 10);
  CHECK(ds->describe() == "fashion_mnist train: 6 x [1,3,3], 10 classes");

  writeIdx(dir.file("train-labels-idx1-ubyte"), kIdxUInt8, {6}, {0, 1, 2, 3, 10, 5}, false);
  std::string msg =
      messageOf<DataError>([&] { openDataset(idxSection(dir.str(), "fashion_mnist"), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train-labels-idx1-ubyte")));
  CHECK(contains(msg, "label 10"));
}

TEST_CASE("idx dataset: a test label outside the train classes is a DataError naming the file") {
  TempDir dir;
  writeSplit(dir.str(), "train", 6, 3, 3, 3, false);  // labels 0..2: 3 classes
  writeSplit(dir.str(), "t10k", 6, 3, 3, 5, true);    // labels 0..4
  std::string msg = messageOf<DataError>([&] { openDataset(idxSection(dir.str()), Split::Test, 1); });
  CHECK(contains(msg, dir.file("t10k-labels-idx1-ubyte.gz")));
  CHECK(contains(msg, "3 classes"));
}

TEST_CASE("idx dataset: image and label counts must agree") {
  TempDir dir;
  writeSplit(dir.str(), "train", 6, 3, 3, 3, false);
  writeIdx(dir.file("train-labels-idx1-ubyte"), kIdxUInt8, {5}, {0, 1, 2, 0, 1}, false);
  std::string msg = messageOf<DataError>([&] { openDataset(idxSection(dir.str()), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train-images-idx3-ubyte")));
  CHECK(contains(msg, dir.file("train-labels-idx1-ubyte")));
  CHECK(contains(msg, "6 images"));
  CHECK(contains(msg, "5 labels"));
}

TEST_CASE("idx dataset: missing files are an IoError naming both names and the fix") {
  TempDir dir;
  std::string msg =
      messageOf<IoError>([&] { openDataset(idxSection(dir.str(), "fashion_mnist"), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train-images-idx3-ubyte")));
  CHECK(contains(msg, dir.file("train-images-idx3-ubyte.gz")));
  CHECK(contains(msg, "dataset-fashion-mnist"));
  CHECK(contains(msg, "[data] dir"));

  // Train present, test missing: the test split names the t10k files.
  writeSplit(dir.str(), "train", 4, 2, 2, 2, false);
  msg = messageOf<IoError>([&] { openDataset(idxSection(dir.str(), "fashion_mnist"), Split::Test, 1); });
  CHECK(contains(msg, "t10k-"));

  // A directory that does not exist says so.
  const std::string gone = dir.file("not-there");
  msg = messageOf<IoError>([&] { openDataset(idxSection(gone), Split::Train, 1); });
  CHECK(contains(msg, gone));
  CHECK(contains(msg, "does not exist"));
}

TEST_CASE("idx dataset: a corrupt file inside the directory is a DataError naming it") {
  TempDir dir;
  writeSplit(dir.str(), "train", 6, 3, 3, 3, true);
  auto gz = readBytes(dir.file("train-images-idx3-ubyte.gz"));
  gz.resize(gz.size() - 12);
  writeBytes(dir.file("train-images-idx3-ubyte.gz"), gz);
  std::string msg = messageOf<DataError>([&] { openDataset(idxSection(dir.str()), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train-images-idx3-ubyte.gz")));
}

TEST_CASE("openDataset: an unknown dataset name is a ConfigError") {
  DataSection d;
  d.dataset = "cifar";
  std::string msg = messageOf<ConfigError>([&] { openDataset(d, Split::Train, 1); });
  CHECK(contains(msg, "cifar"));
  CHECK(contains(msg, "synthetic"));
}
