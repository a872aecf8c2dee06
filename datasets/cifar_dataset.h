// CifarDataset: CIFAR-10 or CIFAR-100 in the official binary format.
//   cifar10:  train = data_batch_1.bin .. data_batch_5.bin (in that order),
//             test = test_batch.bin; 3073-byte records: label (0..9), pixels
//   cifar100: train = train.bin, test = test.bin; 3074-byte records: coarse
//             label, fine label (0..99, the one used), pixels
// The 3072 pixel bytes are 1024 red, 1024 green, 1024 blue, each a row-major
// 32x32 plane: already the [3,32,32] CHW layout, so they are stored as read.
// [data] dir is the directory holding the .bin files or its parent holding the
// archive's unpacked cifar-10-batches-bin/ or cifar-100-binary/.
// Ownership: owns its pixels (as bytes) and labels. Thread-safety: immutable
// after construction; get() is safe from any thread. The constructor blocks
// while reading the files (about 150 MB for a train split).
#pragma once
#include <string>
#include <vector>

#include "datasets/byte_images.h"
#include "datasets/dataset.h"

namespace dtrain {

enum class CifarVariant { Cifar10, Cifar100 };

class CifarDataset : public Dataset {
 public:
  // Throws IoError when a file is missing or unreadable and DataError when
  // one is not whole records or holds a label out of range.
  CifarDataset(CifarVariant variant, const std::string& dir, Split split);

  // The [data] dataset name: "cifar10" / "cifar100".
  static const char* variantName(CifarVariant variant);
  static int64_t variantClasses(CifarVariant variant);
  // Bytes per record: 3073 (CIFAR-10) / 3074 (CIFAR-100).
  static int64_t recordBytes(CifarVariant variant);
  // The split's files in reading order, resolved against `dir` or its
  // archive subdirectory. Throws IoError naming the first missing file and
  // every file the variant expects.
  static std::vector<std::string> splitFiles(CifarVariant variant, const std::string& dir, Split split);
  // The split's record count from the file sizes alone (no reading), for
  // header-only peeks. Throws like the constructor for missing files and
  // sizes that are not whole records.
  static int64_t splitSamples(CifarVariant variant, const std::string& dir, Split split);

  std::string describe() const override;
  int64_t size() const override { return images_.size(); }
  Shape sampleShape() const override { return images_.sampleShape(); }
  int64_t classes() const override { return variantClasses(variant_); }
  int32_t get(int64_t index, float* out) const override { return images_.get(index, out); }
  const ByteImages* byteImages() const override { return &images_; }

 private:
  CifarVariant variant_;
  Split split_;
  ByteImages images_;
};

}  // namespace dtrain
