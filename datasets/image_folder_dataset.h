// ImageFolderDataset: images in class folders (image_folder_listing.h),
// decoded with stb_image on every read and resized to [data] image_size, as
// `channels` planes of floats in [0,1]. Nothing decoded is kept, so memory
// does not grow with the dataset; a read costs a file read and a decode.
//
// Splits: with [data] validation_dir, training reads `dir` and Split::Test
// reads validation_dir (whose class folders must be dir's); without it both
// come from `dir`, split per class by splitImageFolder(validation_fraction,
// split_seed).
//
// Bad images: when opened, every file of the split has its header checked
// (stb_image's info, a few hundred bytes). An unreadable one, with bad_images =
// "fail", is a DataError naming it; with "skip" it is left out and one warning
// says how many and names one. A file whose header reads but whose body does
// not decode shows only in get(): "fail" throws DataError naming it; "skip"
// warns once for that file and returns the next decodable image of the same
// class in its place, so a batch never breaks.
// Ownership: owns its file list. Thread-safety: get() and getAugmented() are
// safe from any number of threads (the set of files already warned about is
// the only shared state, behind a mutex). The constructor and get() block on
// file reads.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_decode.h"
#include "datasets/image_folder_listing.h"

namespace dtrain {

class ImageFolderDataset : public Dataset {
 public:
  // Receives each warning (one line, without the "dtrain: warning: " prefix).
  using WarningSink = std::function<void(const std::string&)>;

  // [data] dir, validation_dir, validation_fraction, split_seed, image_size,
  // channels and bad_images. `warn` defaults to a line on stderr. Throws
  // ConfigError for settings out of range, IoError for a folder that cannot be
  // read, DataError for a folder without classes or images, class folders
  // that differ between dir and validation_dir, or (bad_images = "fail") an
  // unreadable image.
  ImageFolderDataset(const DataSection& data, Split split, WarningSink warn = {});

  std::string describe() const override;
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Shape sampleShape() const override { return Shape{channels_, height_, width_}; }
  int64_t classes() const override { return static_cast<int64_t>(class_names_.size()); }
  int32_t get(int64_t index, float* out) const override;
  int32_t getAugmented(int64_t index, const Augmentation& augmentation, uint64_t draw,
                       float* out) const override;
  bool decodesFiles() const override { return true; }

  const std::vector<std::string>& classNames() const { return class_names_; }
  // This split's images, in index order.
  const std::vector<ImageFile>& files() const { return files_; }
  // Files left out when opened (bad_images = "skip").
  int64_t skippedAtOpen() const { return skipped_; }

 private:
  // Checks every file's header; drops or reports the bad ones.
  void checkHeaders(const std::string& dir);
  // The decoded image of `index`, or under "skip" its substitute.
  DecodedImage decode(int64_t index) const;
  // Reports a file that failed to decode, once per file.
  void warnOnce(const std::string& path, const std::string& message) const;

  Split split_;
  std::string dir_;  // the folder this split reads
  int64_t channels_ = 3, height_ = 0, width_ = 0;
  bool skip_bad_ = true;
  WarningSink warn_;
  std::vector<std::string> class_names_;
  std::vector<ImageFile> files_;
  std::vector<int64_t> class_begin_;  // files of class k: [class_begin_[k], class_begin_[k+1])
  int64_t skipped_ = 0;

  mutable std::mutex warned_mu_;
  mutable std::set<std::string> warned_;  // paths already reported by get()
};

}  // namespace dtrain
