#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "datasets/dataset_info.h"
#include "datasets/image_folder_dataset.h"
#include "datasets/image_folder_listing.h"
#include "tests/datasets/image_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

DataSection folderConfig(const std::string& dir, int64_t height, int64_t width, int64_t channels = 3) {
  DataSection d;
  d.dataset = "image_folder";
  d.dir = dir;
  d.image_size = {height, width};
  d.channels = channels;
  d.validation_fraction = 0.25;
  return d;
}

// A sink that keeps the warnings.
struct Warnings {
  std::vector<std::string> lines;
  ImageFolderDataset::WarningSink sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
};

std::vector<std::string> namesOf(const std::vector<ImageFile>& files, const std::string& root) {
  std::vector<std::string> out;
  for (const ImageFile& f : files) out.push_back(std::filesystem::relative(f.path, root).string());
  return out;
}

std::vector<float> sampleOf(const Dataset& ds, int64_t index, int32_t* label = nullptr) {
  std::vector<float> out(static_cast<size_t>(ds.sampleShape().numel()));
  const int32_t l = ds.get(index, out.data());
  if (label) *label = l;
  return out;
}

}  // namespace

TEST_CASE("image_folder: classes and files are listed sorted, hidden and other files ignored") {
  TempDir tmp("imgfolder");
  const std::string root = tmp / "data";
  writePng(root + "/b_dog/2.png", patternImage(6, 5, 3, 1));
  writePng(root + "/b_dog/10.PNG", patternImage(6, 5, 3, 2));
  writeJpg(root + "/b_dog/a.jpg", patternImage(6, 5, 3, 3));
  writeBmp(root + "/a_cat/x.bmp", patternImage(6, 5, 3, 4));
  writeJpg(root + "/a_cat/y.JPEG", patternImage(6, 5, 3, 5));
  writePng(root + "/a_cat/sub/z.png", patternImage(6, 5, 3, 6));
  writePng(root + "/a_cat/.hidden.png", patternImage(6, 5, 3, 7));
  writePng(root + "/.git/objects.png", patternImage(6, 5, 3, 8));
  tmp.write("data/b_dog/notes.txt", "not an image, not listed");
  tmp.write("data/README.md", "a file beside the class folders");

  const ImageFolderListing listing = listImageFolder(root, "dir");
  CHECK(listing.classes == std::vector<std::string>{"a_cat", "b_dog"});
  CHECK(namesOf(listing.files, root) == std::vector<std::string>{"a_cat/sub/z.png", "a_cat/x.bmp",
                                                                 "a_cat/y.JPEG", "b_dog/10.PNG",
                                                                 "b_dog/2.png", "b_dog/a.jpg"});
  std::vector<int32_t> labels;
  for (const ImageFile& f : listing.files) labels.push_back(f.label);
  CHECK(labels == std::vector<int32_t>{0, 0, 0, 1, 1, 1});

  CHECK(isImageFileName("a.JpEg"));
  CHECK(isImageFileName("b.bmp"));
  CHECK_FALSE(isImageFileName("c.gif"));
  CHECK_FALSE(isImageFileName("png"));
  CHECK_FALSE(isImageFileName("d.png.txt"));

  // validation_dir: the whole of dir is the training split. Nothing is bad,
  // so nothing is reported (the .txt and .md files are not images).
  DataSection d = folderConfig(root, 5, 6);
  d.validation_dir = root;
  Warnings w;
  ImageFolderDataset train(d, Split::Train, w.sink());
  CHECK(train.size() == 6);
  CHECK(train.classes() == 2);
  CHECK(train.sampleShape() == Shape{3, 5, 6});
  CHECK(train.classNames() == listing.classes);
  CHECK(w.lines.empty());
  for (int64_t i = 0; i < train.size(); ++i) {
    int32_t label = -1;
    sampleOf(train, i, &label);
    CHECK(label == labels[static_cast<size_t>(i)]);
  }
  CHECK(contains(train.describe(), "image_folder train: 6 x [3,5,6], 2 classes"));
  CHECK_THROWS_AS(train.get(6, sampleOf(train, 0).data()), Error);
}

TEST_CASE("image_folder: validation counts per class") {
  CHECK(validationCount(10, 0.3) == 3);
  CHECK(validationCount(7, 0.3) == 2);
  CHECK(validationCount(2, 0.3) == 1);  // at least one from a class of two
  CHECK(validationCount(2, 0.9) == 1);  // never all: training keeps the class
  CHECK(validationCount(1, 0.5) == 0);
  CHECK(validationCount(0, 0.5) == 0);
  CHECK(validationCount(100, 0.1) == 10);
}

TEST_CASE("image_folder: a split by fraction is seeded, disjoint, complete and covers every class") {
  TempDir tmp("imgsplit");
  const std::string root = tmp / "data";
  writeClassFolders(root, {{"a", 10}, {"b", 7}, {"c", 2}, {"d", 1}});
  DataSection d = folderConfig(root, 5, 6);
  d.validation_fraction = 0.3;
  d.split_seed = 5;
  ImageFolderDataset train(d, Split::Train), test(d, Split::Test);
  CHECK(train.size() == 7 + 5 + 1 + 1);
  CHECK(test.size() == 3 + 2 + 1 + 0);
  CHECK(train.classes() == 4);
  CHECK(test.classes() == 4);

  std::set<std::string> train_paths, test_paths;
  std::vector<int> train_per_class(4), test_per_class(4);
  for (const ImageFile& f : train.files()) {
    train_paths.insert(f.path);
    ++train_per_class[static_cast<size_t>(f.label)];
  }
  for (const ImageFile& f : test.files()) {
    test_paths.insert(f.path);
    ++test_per_class[static_cast<size_t>(f.label)];
  }
  CHECK(train_per_class == std::vector<int>{7, 5, 1, 1});
  CHECK(test_per_class == std::vector<int>{3, 2, 1, 0});
  for (const std::string& p : test_paths) CHECK(train_paths.count(p) == 0);
  CHECK(train_paths.size() + test_paths.size() == 20);

  // The same seed gives the same split; another seed another one.
  ImageFolderDataset again(d, Split::Test);
  CHECK(namesOf(again.files(), root) == namesOf(test.files(), root));
  bool differs = false;
  for (uint64_t seed = 6; seed < 10 && !differs; ++seed) {
    d.split_seed = seed;
    differs = namesOf(ImageFolderDataset(d, Split::Test).files(), root) != namesOf(test.files(), root);
  }
  CHECK(differs);

  // Index order follows the listing (class by class, sorted) on both sides.
  std::vector<std::string> sorted = namesOf(test.files(), root);
  CHECK(std::is_sorted(sorted.begin(), sorted.end()));

  // `dtrain check` reports the same.
  d.split_seed = 5;
  const DatasetInfo info = peekDataset(d);
  CHECK(info.classes == 4);
  CHECK(info.train_samples == 14);
  CHECK(info.test_samples == 6);
  CHECK(info.sample_shape == Shape{3, 5, 6});
  auto opened = openDataset(d, Split::Test, 1);
  CHECK(opened->size() == 6);
  CHECK(opened->decodesFiles());
}

TEST_CASE("image_folder: validation_dir must have dir's class folders") {
  TempDir tmp("imgval");
  writeClassFolders(tmp / "train", {{"cat", 2}, {"dog", 2}, {"eel", 1}});
  writeClassFolders(tmp / "val", {{"cat", 1}, {"dgo", 1}, {"eel", 1}});
  writeClassFolders(tmp / "val_ok", {{"cat", 1}, {"dog", 3}, {"eel", 1}});
  DataSection d = folderConfig(tmp / "train", 5, 6);
  d.validation_dir = tmp / "val_ok";
  ImageFolderDataset val(d, Split::Test);
  CHECK(val.size() == 5);
  CHECK(ImageFolderDataset(d, Split::Train).size() == 5);
  d.validation_dir = tmp / "val";
  const std::string msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Test); });
  CHECK(contains(msg, "'dog' only in dir"));
  CHECK(contains(msg, "'dgo' only in validation_dir"));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("image_folder: pixels decode exactly at their own size, in [C,H,W] order") {
  TempDir tmp("imgvalues");
  const Pixels rgb = patternImage(5, 4, 3, 9);
  writePng(tmp / "data/only/rgb.png", rgb);
  DataSection d = folderConfig(tmp / "data", 4, 5);
  d.validation_dir = tmp / "data";
  ImageFolderDataset ds(d, Split::Train);
  const std::vector<float> s = sampleOf(ds, 0);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x) {
        CAPTURE(c);
        CAPTURE(y);
        CAPTURE(x);
        REQUIRE(s[static_cast<size_t>((c * 4 + y) * 5 + x)] == static_cast<float>(rgb.at(y, x, c)) / 255.0f);
      }
  // A BMP (uncompressed) decodes exactly as well.
  writeBmp(tmp / "bmp/only/rgb.bmp", rgb);
  d.dir = d.validation_dir = tmp / "bmp";
  CHECK(sampleOf(ImageFolderDataset(d, Split::Train), 0) == s);
}

TEST_CASE("image_folder: channels 1 and 3") {
  TempDir tmp("imgchannels");
  // A grey picture stored as RGB (r = g = b) and one stored as one channel.
  Pixels grey_rgb{4, 3, 3, {}}, grey1{4, 3, 1, {}};
  for (int i = 0; i < 12; ++i) {
    const uint8_t v = static_cast<uint8_t>(i * 20 + 7);
    grey_rgb.bytes.insert(grey_rgb.bytes.end(), {v, v, v});
    grey1.bytes.push_back(v);
  }
  writePng(tmp / "data/a/rgb.png", grey_rgb);
  writePng(tmp / "data/a/grey.png", grey1);
  // A coloured pixel: stb_image's grey is (77 r + 150 g + 29 b) >> 8.
  writePng(tmp / "data/a/red.png", Pixels{1, 1, 3, {200, 100, 50}});
  DataSection d = folderConfig(tmp / "data", 3, 4, 1);
  d.validation_dir = tmp / "data";
  ImageFolderDataset one(d, Split::Train);
  REQUIRE(one.size() == 3);
  CHECK(one.sampleShape() == Shape{1, 3, 4});
  // Sorted: grey.png, red.png, rgb.png.
  const std::vector<float> from_grey = sampleOf(one, 0), from_rgb = sampleOf(one, 2);
  for (int i = 0; i < 12; ++i) {
    CHECK(from_grey[static_cast<size_t>(i)] ==
          static_cast<float>(grey1.bytes[static_cast<size_t>(i)]) / 255.0f);
    CHECK(from_rgb[static_cast<size_t>(i)] == from_grey[static_cast<size_t>(i)]);
  }
  const float red_grey = static_cast<float>((77 * 200 + 150 * 100 + 29 * 50) >> 8) / 255.0f;
  for (float v : sampleOf(one, 1)) CHECK(v == doctest::Approx(red_grey).epsilon(1e-6));

  d.channels = 3;
  ImageFolderDataset three(d, Split::Train);
  CHECK(three.sampleShape() == Shape{3, 3, 4});
  const std::vector<float> grey_as_rgb = sampleOf(three, 0);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 12; ++i)
      CHECK(grey_as_rgb[static_cast<size_t>(c * 12 + i)] == from_grey[static_cast<size_t>(i)]);
}

TEST_CASE("image_folder: resizing keeps the picture") {
  TempDir tmp("imgresize");
  // 32 x 32: left half black, right half white; and a flat 200.
  Pixels halves{32, 32, 3, {}}, flat{24, 20, 3, std::vector<uint8_t>(24 * 20 * 3, 200)};
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c) halves.bytes.push_back(x < 16 ? 0 : 255);
  writePng(tmp / "data/a/0_halves.png", halves);
  writePng(tmp / "data/a/1_flat.png", flat);
  DataSection d = folderConfig(tmp / "data", 8, 8);
  d.validation_dir = tmp / "data";
  ImageFolderDataset ds(d, Split::Train);
  const std::vector<float> s = sampleOf(ds, 0);
  double mean = 0;
  for (float v : s) mean += v;
  mean /= static_cast<double>(s.size());
  CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 8; ++y) {
      CHECK(s[static_cast<size_t>((c * 8 + y) * 8 + 0)] < 0.05f);
      CHECK(s[static_cast<size_t>((c * 8 + y) * 8 + 7)] > 0.95f);
    }
  // A flat picture stays flat (to a byte), upscaled or downscaled.
  for (float v : sampleOf(ds, 1)) CHECK(std::abs(v - 200.0f / 255.0f) <= 1.0f / 255.0f);
  d.image_size = {50, 40};
  for (float v : sampleOf(ImageFolderDataset(d, Split::Train), 1))
    CHECK(std::abs(v - 200.0f / 255.0f) <= 1.0f / 255.0f);
}

TEST_CASE("image_folder: unreadable images are skipped with one warning, or fail naming the file") {
  TempDir tmp("imgbad");
  const std::string root = tmp / "data";
  writeClassFolders(root, {{"cat", 2}, {"dog", 2}});
  writeJpg(root + "/cat/trunc.jpg", patternImage(16, 16, 3, 3));
  truncateFile(root + "/cat/trunc.jpg", 40);  // cut inside the header
  tmp.write("data/cat/text.png", "this is text, not a PNG\n");
  writeBytes(root + "/dog/zero.jpg", {});

  DataSection d = folderConfig(root, 5, 6);
  d.validation_dir = root;
  Warnings w;
  ImageFolderDataset ds(d, Split::Train, w.sink());
  CHECK(ds.size() == 4);
  CHECK(ds.skippedAtOpen() == 3);
  for (const ImageFile& f : ds.files()) CHECK(contains(f.path, "/10"));
  REQUIRE(w.lines.size() == 1);
  CHECK(contains(w.lines[0], "skipped 3 unreadable images in " + root));
  // The first bad file in listing order, and why.
  CHECK(contains(w.lines[0], root + "/cat/text.png (not a JPEG, PNG or BMP image)"));
  CHECK(contains(ds.describe(), "3 unreadable skipped"));

  d.bad_images = "fail";
  std::string msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, root + "/cat/text.png"));
  CHECK(contains(msg, "bad_images = \"skip\""));
  std::filesystem::remove(root + "/cat/text.png");
  msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, root + "/cat/trunc.jpg: corrupt, truncated or unsupported JPEG data"));
  std::filesystem::remove(root + "/cat/trunc.jpg");
  msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, root + "/dog/zero.jpg: empty file"));
  std::filesystem::remove(root + "/dog/zero.jpg");
  CHECK(ImageFolderDataset(d, Split::Train).size() == 4);
}

TEST_CASE("image_folder: a body that does not decode is replaced by the next image of its class, or fails") {
  TempDir tmp("imgbody");
  const std::string root = tmp / "data";
  writeClassFolders(root, {{"cat", 3}, {"dog", 2}}, 8, 8);
  // The header reads (so it passes the check at open); the pixel data is cut.
  truncateFile(root + "/cat/101.png", 60);
  DataSection d = folderConfig(root, 8, 8);
  d.validation_dir = root;
  Warnings w;
  ImageFolderDataset ds(d, Split::Train, w.sink());
  REQUIRE(ds.size() == 5);
  CHECK(w.lines.empty());
  // Index 1 is cat/101.png; its substitute is cat/102.png (index 2).
  int32_t label = -1;
  const std::vector<float> broken = sampleOf(ds, 1, &label);
  CHECK(label == 0);
  CHECK(broken == sampleOf(ds, 2));
  CHECK(sampleOf(ds, 1) == broken);  // the same every time, warned once
  REQUIRE(w.lines.size() == 1);
  CHECK(contains(w.lines[0], "cannot decode " + root + "/cat/101.png"));
  CHECK(contains(w.lines[0], "using " + root + "/cat/102.png"));

  d.bad_images = "fail";
  ImageFolderDataset strict(d, Split::Train);
  CHECK(strict.size() == 5);
  const std::string msg = messageOf<DataError>([&] { sampleOf(strict, 1); });
  CHECK(contains(msg, root + "/cat/101.png: corrupt, truncated or unsupported PNG data"));
  CHECK(contains(msg, "bad_images = \"skip\""));

  // When no image of the class decodes, even "skip" has nothing to give.
  truncateFile(root + "/cat/100.png", 60);
  truncateFile(root + "/cat/102.png", 60);
  d.bad_images = "skip";
  ImageFolderDataset hopeless(d, Split::Train, w.sink());
  CHECK(contains(messageOf<DataError>([&] { sampleOf(hopeless, 0); }), "no other image of class folder"));
}

TEST_CASE("image_folder: missing, empty and classless folders are one-line errors naming the folder") {
  TempDir tmp("imgempty");
  DataSection d = folderConfig(tmp / "nowhere", 5, 6);
  std::string msg = messageOf<IoError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, tmp / "nowhere"));

  std::filesystem::create_directories(tmp / "flat");
  tmp.write("flat/a.png", "no class folders here");
  d.dir = tmp / "flat";
  msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, "holds no class folders"));
  CHECK(contains(msg, tmp / "flat"));

  writeClassFolders(tmp / "data", {{"cat", 2}});
  std::filesystem::create_directories(tmp / "data/dog");
  tmp.write("data/dog/readme.txt", "no images");
  d.dir = tmp / "data";
  msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train); });
  CHECK(contains(msg, "class folder " + (tmp / "data/dog") + " holds no images"));
  CHECK(msg.find('\n') == std::string::npos);

  // Every image of a class unreadable: that class cannot be trained.
  tmp.write("data/dog/bad.jpg", "not a jpeg");
  Warnings w;
  msg = messageOf<DataError>([&] { ImageFolderDataset(d, Split::Train, w.sink()); });
  CHECK(contains(msg, (tmp / "data/dog") + " holds no readable image"));
}
