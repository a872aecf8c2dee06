#include "datasets/image_folder_dataset.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/errors.h"
#include "datasets/augmentation.h"

namespace dtrain {

namespace {

const char* kSkipHint = "set [data] bad_images = \"skip\" to go on without it";

void checkSettings(const DataSection& data) {
  if (data.image_size.size() != 2 || data.image_size[0] < 1 || data.image_size[1] < 1 ||
      data.image_size[0] > 4096 || data.image_size[1] > 4096)
    throw ConfigError("[data] image_size must be [height, width] with extents in [1, 4096]");
  if (data.channels != 1 && data.channels != 3)
    throw ConfigError("[data] channels must be 1 (grey) or 3 (RGB), got " + std::to_string(data.channels));
  if (data.bad_images != "skip" && data.bad_images != "fail")
    throw ConfigError("[data] bad_images must be \"skip\" or \"fail\", got \"" + data.bad_images + "\"");
}

// "'a', 'b'" for messages.
std::string quotedList(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

// The names of `a` that are not in `b` (both sorted).
std::vector<std::string> missingFrom(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& n : a)
    if (!std::binary_search(b.begin(), b.end(), n)) out.push_back(n);
  return out;
}

// The listing of `split`'s images, before the header check.
ImageFolderListing listSplit(const DataSection& data, Split split) {
  if (data.validation_dir.empty()) {
    if (!(data.validation_fraction > 0 && data.validation_fraction < 1))
      throw ConfigError("[data] validation_fraction must be in (0, 1) when no validation_dir is given");
    return splitImageFolder(listImageFolder(data.dir, "dir"), split, data.validation_fraction,
                            data.split_seed);
  }
  if (split == Split::Train) return listImageFolder(data.dir, "dir");
  ImageFolderListing validation = listImageFolder(data.validation_dir, "validation_dir");
  const std::vector<std::string> train_classes = listClassFolders(data.dir, "dir");
  if (validation.classes != train_classes) {
    std::string diff;
    const auto only_train = missingFrom(train_classes, validation.classes);
    const auto only_validation = missingFrom(validation.classes, train_classes);
    if (!only_train.empty()) diff += quotedList(only_train) + " only in dir";
    if (!only_validation.empty())
      diff += (diff.empty() ? "" : "; ") + quotedList(only_validation) + " only in validation_dir";
    throw DataError("[data] validation_dir " + data.validation_dir + " must have the class folders of dir " +
                    data.dir + ": " + diff);
  }
  return validation;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const DataSection& data, Split split, WarningSink warn)
    : split_(split), warn_(std::move(warn)) {
  checkSettings(data);
  channels_ = data.channels;
  height_ = data.image_size[0];
  width_ = data.image_size[1];
  skip_bad_ = data.bad_images == "skip";
  if (!warn_)
    warn_ = [](const std::string& line) { std::fprintf(stderr, "dtrain: warning: %s\n", line.c_str()); };

  ImageFolderListing listing = listSplit(data, split);
  dir_ = listing.dir;
  class_names_ = std::move(listing.classes);
  files_ = std::move(listing.files);
  checkHeaders(dir_);

  class_begin_.assign(class_names_.size() + 1, 0);
  for (const ImageFile& f : files_) ++class_begin_[static_cast<size_t>(f.label) + 1];
  for (size_t k = 1; k < class_begin_.size(); ++k) class_begin_[k] += class_begin_[k - 1];
  // A class with no readable image cannot be learnt; the validation side may
  // lack a class (a class of one image has none there).
  if (split == Split::Train)
    for (size_t k = 0; k < class_names_.size(); ++k)
      if (class_begin_[k] == class_begin_[k + 1])
        throw DataError("class folder " + dir_ + "/" + class_names_[k] +
                        " holds no readable image; add some or remove the folder");
}

void ImageFolderDataset::checkHeaders(const std::string& dir) {
  std::vector<ImageFile> readable;
  readable.reserve(files_.size());
  std::string first_path, first_reason;
  for (ImageFile& f : files_) {
    std::string reason = probeImageFile(f.path);
    if (reason.empty()) {
      readable.push_back(std::move(f));
      continue;
    }
    if (!skip_bad_) throw DataError(f.path + ": " + reason + "; " + kSkipHint);
    if (skipped_++ == 0) {
      first_path = f.path;
      first_reason = reason;
    }
  }
  files_ = std::move(readable);
  if (skipped_ > 0)
    warn_("skipped " + std::to_string(skipped_) +
          (skipped_ == 1 ? " unreadable image in " : " unreadable images in ") + dir + ", e.g. " +
          first_path + " (" + first_reason + ")");
}

std::string ImageFolderDataset::describe() const {
  std::string s = std::string("image_folder ") + splitName(split_) + ": " + std::to_string(size()) + " x " +
                  sampleShape().str() + ", " + std::to_string(classes()) + " classes from " + dir_;
  if (skipped_ > 0) s += " (" + std::to_string(skipped_) + " unreadable skipped)";
  return s;
}

void ImageFolderDataset::warnOnce(const std::string& path, const std::string& message) const {
  std::lock_guard<std::mutex> lock(warned_mu_);
  if (warned_.insert(path).second) warn_(message);
}

DecodedImage ImageFolderDataset::decode(int64_t index) const {
  if (index < 0 || index >= size())
    throw Error("sample index " + std::to_string(index) + " is out of range for a dataset of " +
                std::to_string(size()) + " samples");
  const ImageFile& file = files_[static_cast<size_t>(index)];
  DecodedImage image = decodeImageFile(file.path, static_cast<int>(channels_));
  if (image.ok()) return image;
  if (!skip_bad_) throw DataError(file.path + ": " + image.error + "; " + kSkipHint);
  // The next decodable image of the same class, going round: the same
  // substitute every time, whichever thread or epoch asks.
  const int64_t begin = class_begin_[static_cast<size_t>(file.label)];
  const int64_t end = class_begin_[static_cast<size_t>(file.label) + 1];
  const std::string first_error = image.error;
  for (int64_t step = 1; step < end - begin; ++step) {
    const ImageFile& other = files_[static_cast<size_t>(begin + (index - begin + step) % (end - begin))];
    DecodedImage substitute = decodeImageFile(other.path, static_cast<int>(channels_));
    if (substitute.ok()) {
      warnOnce(file.path, "cannot decode " + file.path + " (" + first_error + "); using " + other.path +
                              " in its place (bad_images = \"skip\")");
      return substitute;
    }
    warnOnce(other.path, "cannot decode " + other.path + " (" + substitute.error + ")");
  }
  throw DataError(file.path + ": " + first_error + ", and no other image of class folder " + dir_ + "/" +
                  class_names_[static_cast<size_t>(file.label)] + " decodes either");
}

int32_t ImageFolderDataset::get(int64_t index, float* out) const {
  const DecodedImage image = decode(index);
  resizeToFloats(image, CropWindow{0, 0, image.height, image.width}, height_, width_, out);
  return files_[static_cast<size_t>(index)].label;
}

int32_t ImageFolderDataset::getAugmented(int64_t index, const Augmentation& augmentation, uint64_t draw,
                                         float* out) const {
  const DecodedImage image = decode(index);
  // The resized crop from the decoded original: one resize, from all its detail.
  resizeToFloats(image, augmentation.resizedCropWindow(draw, image.height, image.width), height_, width_,
                 out);
  augmentation.applyAfterResizedCrop(out, sampleShape(), draw);
  return files_[static_cast<size_t>(index)].label;
}

}  // namespace dtrain
