// IdxDataset: an image classification dataset stored as IDX files in one
// directory, laid out like (Fashion-)MNIST:
//   train: train-images-idx3-ubyte + train-labels-idx1-ubyte
//   test:  t10k-images-idx3-ubyte  + t10k-labels-idx1-ubyte
// each raw or gzip-compressed with a ".gz" suffix.
// Ownership: owns its pixels (as bytes) and labels. Thread-safety: immutable
// after construction; get() is safe from any thread. The constructor blocks
// while reading the files.
#pragma once
#include <string>

#include "datasets/byte_images.h"
#include "datasets/dataset.h"

namespace dtrain {

class IdxDataset : public Dataset {
 public:
  // `name` is the [data] dataset name for messages ("fashion_mnist" or "idx").
  // `classes` > 0 fixes the class count (fashion_mnist: 10); every label must
  // be below it. 0 means "max label + 1" (allowed for the train split only; a
  // test split takes the count of its train split, see trainClasses()).
  // Throws IoError when a file is missing and DataError when one is invalid.
  IdxDataset(std::string name, const std::string& dir, Split split, int64_t classes);

  // The class count implied by the train labels in `dir` (max label + 1),
  // reading only the small labels file. Throws like the constructor.
  static int64_t trainClasses(const std::string& name, const std::string& dir);
  // The images / labels file of a split in `dir` (raw preferred, else .gz);
  // IoError naming both candidates when neither exists.
  static std::string imagesPath(const std::string& name, const std::string& dir, Split split);
  static std::string labelsPath(const std::string& name, const std::string& dir, Split split);

  std::string describe() const override;
  int64_t size() const override { return images_.size(); }
  Shape sampleShape() const override { return images_.sampleShape(); }
  int64_t classes() const override { return classes_; }
  int32_t get(int64_t index, float* out) const override { return images_.get(index, out); }
  const ByteImages* byteImages() const override { return &images_; }

 private:
  std::string name_;
  Split split_;
  int64_t classes_ = 0;
  ByteImages images_;
};

}  // namespace dtrain
