#include "datasets/idx_dataset.h"

#include <algorithm>
#include <filesystem>

#include "core/errors.h"
#include "datasets/idx_file.h"

namespace dtrain {

namespace {

namespace fs = std::filesystem;

// The file for `stem` in `dir`: the raw file if present (no decompression),
// else the ".gz" one. Neither: IoError naming both and the two usual fixes.
std::string findFile(const std::string& name, const std::string& dir, const std::string& stem) {
  const std::string raw = (fs::path(dir) / stem).string();
  const std::string gz = raw + ".gz";
  std::error_code ec;
  if (fs::is_regular_file(raw, ec)) return raw;
  if (fs::is_regular_file(gz, ec)) return gz;
  std::string why = fs::is_directory(dir, ec) ? "" : " (directory " + dir + " does not exist)";
  throw IoError(name + " data not found: neither " + raw + " nor " + gz + " exists" + why +
                "; install the dataset-fashion-mnist package or set [data] dir to the directory holding "
                "the IDX files");
}

std::string stemPrefix(Split split) { return split == Split::Train ? "train" : "t10k"; }

std::vector<int32_t> readLabels(const std::string& path) {
  IdxArray a = readIdx(path, 1);
  return std::vector<int32_t>(a.data.begin(), a.data.end());
}

}  // namespace

std::string IdxDataset::imagesPath(const std::string& name, const std::string& dir, Split split) {
  return findFile(name, dir, stemPrefix(split) + "-images-idx3-ubyte");
}

std::string IdxDataset::labelsPath(const std::string& name, const std::string& dir, Split split) {
  return findFile(name, dir, stemPrefix(split) + "-labels-idx1-ubyte");
}

int64_t IdxDataset::trainClasses(const std::string& name, const std::string& dir) {
  std::vector<int32_t> labels = readLabels(labelsPath(name, dir, Split::Train));
  int32_t max = 0;
  for (int32_t l : labels) max = std::max(max, l);
  return int64_t{max} + 1;
}

IdxDataset::IdxDataset(std::string name, const std::string& dir, Split split, int64_t classes)
    : name_(std::move(name)), split_(split), classes_(classes) {
  if (classes < 0 || (classes == 0 && split != Split::Train))
    throw Error("internal: IdxDataset needs a class count for the test split");
  const std::string images_path = imagesPath(name_, dir, split);
  const std::string labels_path = labelsPath(name_, dir, split);

  // Labels first: the file is small, so its problems are reported before
  // the images are decompressed.
  std::vector<int32_t> labels = readLabels(labels_path);
  if (classes_ == 0) {
    int32_t max = 0;
    for (int32_t l : labels) max = std::max(max, l);
    classes_ = int64_t{max} + 1;
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes_) {
      std::string why = name_ == "fashion_mnist"
                            ? "fashion_mnist has " + std::to_string(classes_) +
                                  " classes (for other IDX data set [data] dataset = \"idx\")"
                            : "the train labels define " + std::to_string(classes_) + " classes (0 to " +
                                  std::to_string(classes_ - 1) +
                                  "; check that the train and test files belong together)";
      throw DataError(labels_path + ": label " + std::to_string(labels[i]) + " of sample " +
                      std::to_string(i) + " is out of range: " + why);
    }
  }

  IdxArray images = readIdx(images_path, 3);
  if (images.dims[0] != static_cast<int64_t>(labels.size()))
    throw DataError(images_path + " holds " + std::to_string(images.dims[0]) + " images but " + labels_path +
                    " holds " + std::to_string(labels.size()) +
                    " labels; both files must come from the same dataset (re-download or reinstall it)");

  Shape shape{1, images.dims[1], images.dims[2]};
  images_ = ByteImages(shape, std::move(images.data), std::move(labels));
}

std::string IdxDataset::describe() const {
  return name_ + " " + splitName(split_) + ": " + std::to_string(size()) + " x " + sampleShape().str() +
         ", " + std::to_string(classes_) + " classes";
}

}  // namespace dtrain
