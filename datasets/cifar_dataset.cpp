#include "datasets/cifar_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/errors.h"

namespace dtrain {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kChannels = 3;
constexpr int64_t kSide = 32;
constexpr int64_t kPixelBytes = kChannels * kSide * kSide;  // 3072
// Records read per fread: large reads without a second copy of the file.
constexpr int64_t kRecordsPerRead = 1024;

// "CIFAR-10" / "CIFAR-100", the format's own name, for messages.
std::string formatName(CifarVariant variant) {
  return variant == CifarVariant::Cifar10 ? "CIFAR-10" : "CIFAR-100";
}

// The directory the official archive unpacks to.
const char* archiveDir(CifarVariant variant) {
  return variant == CifarVariant::Cifar10 ? "cifar-10-batches-bin" : "cifar-100-binary";
}

const char* archiveFile(CifarVariant variant) {
  return variant == CifarVariant::Cifar10 ? "cifar-10-binary.tar.gz" : "cifar-100-binary.tar.gz";
}

std::vector<std::string> fileNames(CifarVariant variant, Split split) {
  if (variant == CifarVariant::Cifar100) return {split == Split::Train ? "train.bin" : "test.bin"};
  if (split == Split::Test) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

// Every file of a variant, for the missing-file message.
std::string expectedFiles(CifarVariant variant) {
  return variant == CifarVariant::Cifar10
             ? "data_batch_1.bin .. data_batch_5.bin (train) and test_batch.bin (test)"
             : "train.bin (train) and test.bin (test)";
}

// `dir` itself when it holds the split's first file, else the archive's
// subdirectory when there is one, else `dir` (so the missing-file error
// names the directory the user gave).
fs::path dataDir(CifarVariant variant, const std::string& dir, Split split) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / fileNames(variant, split).front(), ec)) return dir;
  const fs::path sub = fs::path(dir) / archiveDir(variant);
  if (fs::is_directory(sub, ec)) return sub;
  return dir;
}

// The number of records in `path`; DataError when its size is not a whole,
// non-zero number of records.
int64_t recordsIn(CifarVariant variant, const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) throw IoError(path + ": cannot read its size: " + ec.message());
  const auto record = static_cast<uintmax_t>(CifarDataset::recordBytes(variant));
  const std::string what = formatName(variant);
  if (bytes == 0 || bytes % record != 0)
    throw DataError(path + " is " + std::to_string(bytes) + " bytes, not a whole number of " +
                    std::to_string(record) + "-byte " + what + " records; the file is truncated or not " +
                    what + " binary");
  return static_cast<int64_t>(bytes / record);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Appends the `records` records of `path` to pixels/labels, checking every
// label against the variant's class count.
void readFile(CifarVariant variant, const std::string& path, int64_t records, std::vector<uint8_t>& pixels,
              std::vector<int32_t>& labels) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw IoError(path + ": cannot open: " + std::strerror(errno));
  const int64_t record_bytes = CifarDataset::recordBytes(variant);
  // CIFAR-100 puts the coarse label first; the fine label is the one used.
  const int64_t label_offset = variant == CifarVariant::Cifar10 ? 0 : 1;
  const int64_t label_bytes = record_bytes - kPixelBytes;
  const int64_t classes = CifarDataset::variantClasses(variant);
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min(records, kRecordsPerRead) * record_bytes));
  for (int64_t first = 0; first < records; first += kRecordsPerRead) {
    const int64_t count = std::min(records - first, kRecordsPerRead);
    const auto want = static_cast<size_t>(count * record_bytes);
    if (std::fread(buffer.data(), 1, want, file.get()) != want)
      throw IoError(path + ": cannot read record " + std::to_string(first) + " onwards: " +
                    (std::ferror(file.get()) ? std::strerror(errno) : "the file shrank while being read"));
    for (int64_t r = 0; r < count; ++r) {
      const uint8_t* rec = buffer.data() + r * record_bytes;
      const int32_t label = rec[label_offset];
      if (label >= classes)
        throw DataError(path + ": record " + std::to_string(first + r) + " has label " +
                        std::to_string(label) + ", but " + formatName(variant) + " labels are 0 to " +
                        std::to_string(classes - 1) + "; the file is corrupt or not " + formatName(variant) +
                        " binary");
      labels.push_back(label);
      pixels.insert(pixels.end(), rec + label_bytes, rec + record_bytes);
    }
  }
}

}  // namespace

const char* CifarDataset::variantName(CifarVariant variant) {
  return variant == CifarVariant::Cifar10 ? "cifar10" : "cifar100";
}

int64_t CifarDataset::variantClasses(CifarVariant variant) {
  return variant == CifarVariant::Cifar10 ? 10 : 100;
}

int64_t CifarDataset::recordBytes(CifarVariant variant) {
  return (variant == CifarVariant::Cifar10 ? 1 : 2) + kPixelBytes;
}

std::vector<std::string> CifarDataset::splitFiles(CifarVariant variant, const std::string& dir, Split split) {
  const fs::path base = dataDir(variant, dir, split);
  std::vector<std::string> paths;
  for (const std::string& name : fileNames(variant, split)) {
    const std::string path = (base / name).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      std::string why = fs::is_directory(dir, ec) ? "" : " (directory " + dir + " does not exist)";
      throw IoError(std::string(variantName(variant)) + " " + splitName(split) + " data not found: " + path +
                    " does not exist" + why + "; " + variantName(variant) + " expects " +
                    expectedFiles(variant) + " in [data] dir or its " + archiveDir(variant) +
                    "/ subdirectory (unpack " + archiveFile(variant) + " there)");
    }
    paths.push_back(path);
  }
  return paths;
}

int64_t CifarDataset::splitSamples(CifarVariant variant, const std::string& dir, Split split) {
  int64_t total = 0;
  for (const std::string& path : splitFiles(variant, dir, split)) total += recordsIn(variant, path);
  return total;
}

CifarDataset::CifarDataset(CifarVariant variant, const std::string& dir, Split split)
    : variant_(variant), split_(split) {
  const std::vector<std::string> paths = splitFiles(variant, dir, split);
  // Sizes first: every file is checked before the first large read.
  std::vector<int64_t> records;
  int64_t total = 0;
  for (const std::string& path : paths) {
    records.push_back(recordsIn(variant, path));
    total += records.back();
  }
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  pixels.reserve(static_cast<size_t>(total * kPixelBytes));
  labels.reserve(static_cast<size_t>(total));
  for (size_t i = 0; i < paths.size(); ++i) readFile(variant, paths[i], records[i], pixels, labels);
  images_ = ByteImages(Shape{kChannels, kSide, kSide}, std::move(pixels), std::move(labels));
}

std::string CifarDataset::describe() const {
  return std::string(variantName(variant_)) + " " + splitName(split_) + ": " + std::to_string(size()) +
         " x " + sampleShape().str() + ", " + std::to_string(classes()) + " classes";
}

}  // namespace dtrain
