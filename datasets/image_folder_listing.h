// The files of an image folder: `dir` holds one sub-folder per class (sorted
// names are the class indices 0..K-1), each holding that class's images
// (.jpg, .jpeg, .png, .bmp in any case, also in nested folders). Hidden
// entries (names starting with '.') and other files are ignored. Everything
// is sorted by path, so the listing is the same on every machine.
// Also the per-class seeded split of one folder into training and validation
// images, for jobs without a validation_dir.
// Ownership: plain values. Thread-safety: free functions; they block on
// directory reads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace dtrain {

struct ImageFile {
  std::string path;
  int32_t label = 0;
};

struct ImageFolderListing {
  std::string dir;
  std::vector<std::string> classes;  // folder names, sorted; index = label
  std::vector<ImageFile> files;      // class by class, each class's files sorted by path
};

// Whether a file name has one of the image extensions.
bool isImageFileName(const std::string& name);

// The class folder names of `dir`, sorted. `key` ("dir", "validation_dir")
// names the [data] key in messages. Throws IoError when `dir` is not a
// readable directory and DataError when it holds no class folder.
std::vector<std::string> listClassFolders(const std::string& dir, const std::string& key);

// Every image of `dir`. Throws as listClassFolders, and DataError naming the
// first class folder that holds no image.
ImageFolderListing listImageFolder(const std::string& dir, const std::string& key);

// Validation images of a class of n: `fraction` of them rounded, at least one
// when n >= 2, and never all (the training side keeps every class).
int64_t validationCount(int64_t n, double fraction);

// `split`'s share of `listing` when one folder is split: of each class, the
// first validationCount() images of a shuffle seeded by (seed, class) are
// the validation (Split::Test) side, the rest the training side. Listing order
// is kept. The two sides are disjoint and together the whole listing.
ImageFolderListing splitImageFolder(const ImageFolderListing& listing, Split split, double fraction,
                                    uint64_t seed);

}  // namespace dtrain
