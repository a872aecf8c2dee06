#include "datasets/image_folder_listing.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <system_error>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSplitTag = 0x73706c6974000001ULL;

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// The entries of `dir`, sorted, without hidden ones; IoError naming `dir` on failure.
std::vector<fs::directory_entry> entriesOf(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (!hidden(it->path())) out.push_back(*it);
  if (ec) throw IoError("cannot list " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const fs::directory_entry& a, const fs::directory_entry& b) { return a.path() < b.path(); });
  return out;
}

bool isDirectory(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_directory(ec);  // follows symbolic links
}

// The images under `folder`, nested folders included (not through symbolic
// links to folders, which could loop), sorted by path.
void collectImages(const fs::path& folder, int depth, std::vector<std::string>* out) {
  for (const fs::directory_entry& e : entriesOf(folder)) {
    std::error_code ec;
    if (e.is_symlink(ec) && isDirectory(e)) continue;
    if (isDirectory(e)) {
      if (depth < 32) collectImages(e.path(), depth + 1, out);
    } else if (isImageFileName(e.path().filename().string())) {
      out->push_back(e.path().string());
    }
  }
}

}  // namespace

bool isImageFileName(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "bmp";
}

std::vector<std::string> listClassFolders(const std::string& dir, const std::string& key) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IoError("[data] " + key + " '" + dir +
                  "' is not a directory; set it to a folder holding one sub-folder of images per class");
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : entriesOf(dir))
    if (isDirectory(e)) classes.push_back(e.path().filename().string());
  if (classes.empty())
    throw DataError(
        "[data] " + key + " '" + dir +
        "' holds no class folders; put each class's images in a sub-folder named after the class");
  return classes;
}

ImageFolderListing listImageFolder(const std::string& dir, const std::string& key) {
  ImageFolderListing listing;
  listing.dir = dir;
  listing.classes = listClassFolders(dir, key);
  for (size_t k = 0; k < listing.classes.size(); ++k) {
    const fs::path folder = fs::path(dir) / listing.classes[k];
    std::vector<std::string> paths;
    collectImages(folder, 0, &paths);
    if (paths.empty())
      throw DataError("class folder " + folder.string() +
                      " holds no images (.jpg, .jpeg, .png or .bmp); add some or remove the folder");
    for (std::string& p : paths) listing.files.push_back({std::move(p), static_cast<int32_t>(k)});
  }
  return listing;
}

int64_t validationCount(int64_t n, double fraction) {
  if (n < 2) return 0;
  const int64_t v = std::llround(static_cast<double>(n) * fraction);
  return std::clamp<int64_t>(v, 1, n - 1);
}

ImageFolderListing splitImageFolder(const ImageFolderListing& listing, Split split, double fraction,
                                    uint64_t seed) {
  ImageFolderListing out;
  out.dir = listing.dir;
  out.classes = listing.classes;
  const bool want_validation = split == Split::Test;
  size_t begin = 0;
  while (begin < listing.files.size()) {
    const int32_t label = listing.files[begin].label;
    size_t end = begin;
    while (end < listing.files.size() && listing.files[end].label == label) ++end;
    const int64_t n = static_cast<int64_t>(end - begin);
    // Fisher-Yates with our own generator, as the Sampler does: the same
    // split on every machine and standard library.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    Rng rng(Rng::mix(Rng::mix(seed, kSplitTag), static_cast<uint64_t>(label)));
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order[static_cast<size_t>(i)],
                order[static_cast<size_t>(rng.below(static_cast<uint64_t>(i) + 1))]);
    std::vector<bool> validation(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < validationCount(n, fraction); ++i)
      validation[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
    for (int64_t i = 0; i < n; ++i)
      if (validation[static_cast<size_t>(i)] == want_validation)
        out.files.push_back(listing.files[begin + static_cast<size_t>(i)]);
    begin = end;
  }
  return out;
}

}  // namespace dtrain
