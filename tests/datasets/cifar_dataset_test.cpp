#include "datasets/cifar_dataset.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "core/errors.h"
#include "datasets/dataset.h"
#include "test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

DataSection cifarSection(const std::string& dir, const std::string& kind) {
  DataSection d;
  d.dataset = kind;
  d.dir = dir;
  return d;
}

// CIFAR-10 train labels: a pattern that differs from the record index.
uint8_t cifar10Label(int64_t i) { return static_cast<uint8_t>((i * 3 + 1) % 10); }
// CIFAR-100: the fine label (the one used) and a different coarse label.
uint8_t fineLabel(int64_t i) { return static_cast<uint8_t>((i * 37 + 5) % 100); }
uint8_t coarseLabel(int64_t i) { return static_cast<uint8_t>(19 - i % 20); }

// Appends one record: the label bytes, then pixelOf(sample, p) for p in CHW order.
void appendRecord(std::vector<uint8_t>& out, const std::vector<uint8_t>& label_bytes, int64_t sample) {
  out.insert(out.end(), label_bytes.begin(), label_bytes.end());
  for (int64_t p = 0; p < kPixels; ++p) out.push_back(pixelOf(sample, p));
}

// CIFAR-10 in `dir`: train records numbered 0..9 spread over the five batch
// files as 2,3,1,2,2; test records numbered 100..102.
constexpr int64_t kBatchRecords[5] = {2, 3, 1, 2, 2};
void writeCifar10(const std::string& dir) {
  int64_t sample = 0;
  for (int b = 0; b < 5; ++b) {
    std::vector<uint8_t> bytes;
    for (int64_t r = 0; r < kBatchRecords[b]; ++r, ++sample)
      appendRecord(bytes, {cifar10Label(sample)}, sample);
    writeBytes(dir + "/data_batch_" + std::to_string(b + 1) + ".bin", bytes);
  }
  std::vector<uint8_t> test;
  for (int64_t s = 100; s < 103; ++s) appendRecord(test, {cifar10Label(s)}, s);
  writeBytes(dir + "/test_batch.bin", test);
}

// CIFAR-100 in `dir`: train records 0..3, test records 200..201.
void writeCifar100(const std::string& dir) {
  std::vector<uint8_t> train, test;
  for (int64_t s = 0; s < 4; ++s) appendRecord(train, {coarseLabel(s), fineLabel(s)}, s);
  for (int64_t s = 200; s < 202; ++s) appendRecord(test, {coarseLabel(s), fineLabel(s)}, s);
  writeBytes(dir + "/train.bin", train);
  writeBytes(dir + "/test.bin", test);
}

// Number of pixels of dataset sample `index` that differ from pixelOf(sample, p) / 255.
int64_t pixelMismatches(const Dataset& ds, int64_t index, int64_t sample, int32_t* label) {
  std::vector<float> px(kPixels);
  *label = ds.get(index, px.data());
  int64_t bad = 0;
  for (int64_t p = 0; p < kPixels; ++p)
    if (px[static_cast<size_t>(p)] != pixelOf(sample, p) / 255.0f) ++bad;
  return bad;
}

}  // namespace

TEST_CASE("cifar10: the five train batches are concatenated in order; test_batch is the test split") {
  TempDir dir;
  writeCifar10(dir.str());
  auto train = openDataset(cifarSection(dir.str(), "cifar10"), Split::Train, 1);
  auto test = openDataset(cifarSection(dir.str(), "cifar10"), Split::Test, 1);
  CHECK(train->size() == 10);
  CHECK(test->size() == 3);
  CHECK(train->sampleShape() == Shape{3, 32, 32});
  CHECK(train->classes() == 10);
  CHECK(test->classes() == 10);
  CHECK(train->describe() == "cifar10 train: 10 x [3,32,32], 10 classes");
  CHECK(test->describe() == "cifar10 test: 3 x [3,32,32], 10 classes");
  for (int64_t i = 0; i < 10; ++i) {
    CAPTURE(i);
    int32_t label = -1;
    CHECK(pixelMismatches(*train, i, i, &label) == 0);
    CHECK(label == cifar10Label(i));
  }
  for (int64_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    int32_t label = -1;
    CHECK(pixelMismatches(*test, i, 100 + i, &label) == 0);
    CHECK(label == cifar10Label(100 + i));
  }
  std::vector<float> px(kPixels);
  CHECK_THROWS_AS(train->get(10, px.data()), Error);
  CHECK_THROWS_AS(train->get(-1, px.data()), Error);
  CHECK(CifarDataset::splitSamples(CifarVariant::Cifar10, dir.str(), Split::Train) == 10);
  CHECK(CifarDataset::splitSamples(CifarVariant::Cifar10, dir.str(), Split::Test) == 3);
}

TEST_CASE("cifar10: the record's red, green and blue planes land in CHW order") {
  TempDir dir;
  writeCifar10(dir.str());
  // Record 0 of test_batch.bin: planes of constant 10 / 20 / 30 except one
  // marked pixel per plane at (row 2, column 5).
  std::vector<uint8_t> rec = {7};
  for (uint8_t plane : {10, 20, 30})
    for (int64_t p = 0; p < 1024; ++p)
      rec.push_back(p == 2 * 32 + 5 ? static_cast<uint8_t>(plane + 1) : plane);
  writeBytes(dir.file("test_batch.bin"), rec);
  CifarDataset ds(CifarVariant::Cifar10, dir.str(), Split::Test);
  std::vector<float> px(kPixels);
  CHECK(ds.get(0, px.data()) == 7);
  for (int64_t c = 0; c < 3; ++c) {
    CAPTURE(c);
    const float plane = static_cast<float>(10 * (c + 1));
    CHECK(px[static_cast<size_t>(c * 1024)] == plane / 255.0f);
    CHECK(px[static_cast<size_t>(c * 1024 + 1023)] == plane / 255.0f);
    CHECK(px[static_cast<size_t>(c * 1024 + 2 * 32 + 5)] == (plane + 1) / 255.0f);
    CHECK(px[static_cast<size_t>(c * 1024 + 5 * 32 + 2)] == plane / 255.0f);
  }
}

TEST_CASE("cifar100: train.bin and test.bin use the fine label and have 100 classes") {
  TempDir dir;
  writeCifar100(dir.str());
  auto train = openDataset(cifarSection(dir.str(), "cifar100"), Split::Train, 1);
  auto test = openDataset(cifarSection(dir.str(), "cifar100"), Split::Test, 1);
  CHECK(train->size() == 4);
  CHECK(test->size() == 2);
  CHECK(train->sampleShape() == Shape{3, 32, 32});
  CHECK(train->classes() == 100);
  CHECK(test->describe() == "cifar100 test: 2 x [3,32,32], 100 classes");
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    int32_t label = -1;
    CHECK(pixelMismatches(*train, i, i, &label) == 0);
    CHECK(label == fineLabel(i));
  }
  int32_t label = -1;
  CHECK(pixelMismatches(*test, 1, 201, &label) == 0);
  CHECK(label == fineLabel(201));
  CHECK(fineLabel(201) != coarseLabel(201));
}

TEST_CASE("cifar: [data] dir may be the parent of the archive's unpacked directory") {
  TempDir dir;
  std::filesystem::create_directory(dir.file("cifar-10-batches-bin"));
  std::filesystem::create_directory(dir.file("cifar-100-binary"));
  writeCifar10(dir.file("cifar-10-batches-bin"));
  writeCifar100(dir.file("cifar-100-binary"));
  auto c10 = openDataset(cifarSection(dir.str(), "cifar10"), Split::Train, 1);
  auto c100 = openDataset(cifarSection(dir.str(), "cifar100"), Split::Test, 1);
  CHECK(c10->size() == 10);
  CHECK(c100->size() == 2);
  int32_t label = -1;
  CHECK(pixelMismatches(*c10, 9, 9, &label) == 0);
  CHECK(label == cifar10Label(9));
  CHECK(CifarDataset::splitFiles(CifarVariant::Cifar100, dir.str(), Split::Train) ==
        std::vector<std::string>{dir.file("cifar-100-binary/train.bin")});
}

TEST_CASE("cifar: a missing file is an IoError naming it and every expected file") {
  TempDir dir;
  writeCifar10(dir.str());
  std::filesystem::remove(dir.file("data_batch_3.bin"));
  std::string msg =
      messageOf<IoError>([&] { openDataset(cifarSection(dir.str(), "cifar10"), Split::Train, 1); });
  CHECK(contains(msg, dir.file("data_batch_3.bin") + " does not exist"));
  CHECK(contains(msg, "cifar10 train data not found"));
  CHECK(contains(msg, "data_batch_1.bin .. data_batch_5.bin (train) and test_batch.bin (test)"));
  CHECK(contains(msg, "cifar-10-batches-bin/"));
  // The test split does not need the train files.
  CHECK(openDataset(cifarSection(dir.str(), "cifar10"), Split::Test, 1)->size() == 3);

  msg = messageOf<IoError>([&] { openDataset(cifarSection(dir.str(), "cifar100"), Split::Test, 1); });
  CHECK(contains(msg, dir.file("test.bin") + " does not exist"));
  CHECK(contains(msg, "train.bin (train) and test.bin (test)"));
  CHECK(contains(msg, "cifar-100-binary/"));

  const std::string gone = dir.file("not-there");
  msg = messageOf<IoError>([&] { openDataset(cifarSection(gone, "cifar10"), Split::Train, 1); });
  CHECK(contains(msg, "directory " + gone + " does not exist"));
}

TEST_CASE("cifar: a size that is not whole records is a DataError naming the file") {
  TempDir dir;
  writeCifar10(dir.str());
  auto bytes = readBytes(dir.file("data_batch_4.bin"));
  bytes.resize(bytes.size() - 5);  // 2 * 3073 - 5 = 6141
  writeBytes(dir.file("data_batch_4.bin"), bytes);
  std::string msg =
      messageOf<DataError>([&] { openDataset(cifarSection(dir.str(), "cifar10"), Split::Train, 1); });
  CHECK(msg ==
        dir.file("data_batch_4.bin") +
            " is 6141 bytes, not a whole number of 3073-byte CIFAR-10 records; the file is truncated or "
            "not CIFAR-10 binary");
  CHECK_THROWS_AS(CifarDataset::splitSamples(CifarVariant::Cifar10, dir.str(), Split::Train), DataError);

  // CIFAR-10 records read as CIFAR-100 (3 x 3073 = 9219 bytes) do not divide by 3074 either.
  writeCifar100(dir.str());
  std::filesystem::copy_file(dir.file("test_batch.bin"), dir.file("test.bin"),
                             std::filesystem::copy_options::overwrite_existing);
  msg = messageOf<DataError>([&] { openDataset(cifarSection(dir.str(), "cifar100"), Split::Test, 1); });
  CHECK(contains(msg, dir.file("test.bin") + " is 9219 bytes"));
  CHECK(contains(msg, "3074-byte CIFAR-100 records"));

  writeBytes(dir.file("train.bin"), {});
  msg = messageOf<DataError>([&] { openDataset(cifarSection(dir.str(), "cifar100"), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train.bin") + " is 0 bytes"));
}

TEST_CASE("cifar: a label out of range is a DataError naming the record and file") {
  TempDir dir;
  writeCifar10(dir.str());
  auto bytes = readBytes(dir.file("data_batch_2.bin"));
  bytes[3073] = 10;  // record 1's label
  writeBytes(dir.file("data_batch_2.bin"), bytes);
  std::string msg =
      messageOf<DataError>([&] { openDataset(cifarSection(dir.str(), "cifar10"), Split::Train, 1); });
  CHECK(msg == dir.file("data_batch_2.bin") +
                   ": record 1 has label 10, but CIFAR-10 labels are 0 to 9; the file is corrupt or not "
                   "CIFAR-10 binary");

  writeCifar100(dir.str());
  bytes = readBytes(dir.file("train.bin"));
  bytes[2 * 3074] = 150;      // record 2's coarse label is not used
  bytes[3 * 3074 + 1] = 100;  // record 3's fine label is out of range
  writeBytes(dir.file("train.bin"), bytes);
  msg = messageOf<DataError>([&] { openDataset(cifarSection(dir.str(), "cifar100"), Split::Train, 1); });
  CHECK(contains(msg, dir.file("train.bin") + ": record 3 has label 100"));
  CHECK(contains(msg, "CIFAR-100 labels are 0 to 99"));
}

TEST_CASE("openDataset: the unknown-dataset message lists the CIFAR names") {
  std::string msg = messageOf<ConfigError>([&] { openDataset(cifarSection(".", "cifar"), Split::Train, 1); });
  CHECK(contains(msg, "cifar10"));
  CHECK(contains(msg, "cifar100"));
}
