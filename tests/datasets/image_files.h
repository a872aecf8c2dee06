// Helpers for the image_folder tests: small images with known pixels written
// with stb_image_write, and class folders of them.
#pragma once
#include <doctest/doctest.h>
#include <stb_image_write.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/datasets/test_files.h"

namespace dtrain::test {

// Interleaved pixels (row-major, `channels` a pixel) of a w x h image.
struct Pixels {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> bytes;
  uint8_t at(int y, int x, int c) const { return bytes[static_cast<size_t>((y * width + x) * channels + c)]; }
};

// A pattern that differs between seeds, positions and channels.
inline Pixels patternImage(int width, int height, int channels, int seed) {
  Pixels p{width, height, channels, std::vector<uint8_t>(static_cast<size_t>(width * height * channels))};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        p.bytes[static_cast<size_t>((y * width + x) * channels + c)] =
            static_cast<uint8_t>((seed * 53 + y * 29 + x * 11 + c * 80) % 256);
  return p;
}

inline void ensureParent(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
}

inline void writePng(const std::string& path, const Pixels& p) {
  ensureParent(path);
  REQUIRE(stbi_write_png(path.c_str(), p.width, p.height, p.channels, p.bytes.data(), p.width * p.channels) !=
          0);
}

inline void writeJpg(const std::string& path, const Pixels& p) {
  ensureParent(path);
  REQUIRE(stbi_write_jpg(path.c_str(), p.width, p.height, p.channels, p.bytes.data(), 90) != 0);
}

inline void writeBmp(const std::string& path, const Pixels& p) {
  ensureParent(path);
  REQUIRE(stbi_write_bmp(path.c_str(), p.width, p.height, p.channels, p.bytes.data()) != 0);
}

// The first `keep` bytes of the file at `path`, written back.
inline void truncateFile(const std::string& path, size_t keep) {
  std::vector<uint8_t> bytes = readBytes(path);
  REQUIRE(bytes.size() > keep);
  bytes.resize(keep);
  writeBytes(path, bytes);
}

// root/<name>/<i>.png for each (name, count): patterns of w x h, seed = a
// running number so every image differs.
inline void writeClassFolders(const std::string& root,
                              const std::vector<std::pair<std::string, int>>& classes, int width = 6,
                              int height = 5) {
  int seed = 0;
  for (const auto& [name, count] : classes)
    for (int i = 0; i < count; ++i)
      writePng(root + "/" + name + "/" + std::to_string(100 + i) + ".png",
               patternImage(width, height, 3, seed++));
}

}  // namespace dtrain::test
