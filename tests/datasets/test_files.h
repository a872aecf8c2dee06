// Helpers for the dataset tests: a self-deleting temp directory, raw file
// writers for deliberately broken files, a small IDX dataset on disk, and a
// check that an exception has the right type and names a file.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/idx_file.h"
#include "tests/common/temp_dir.h"

namespace dtrain::test {

using dtrain::testing::TempDir;

// Writes exactly `bytes` to `path`, gzip-compressed when asked.
inline void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false) {
  if (gzip) {
    gzFile gz = gzopen(path.c_str(), "wb");
    REQUIRE(gz != nullptr);
    if (!bytes.empty()) REQUIRE(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
    REQUIRE(gzclose(gz) == Z_OK);
  } else {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(f.good());
  }
}

inline std::vector<uint8_t> readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// An IDX header: magic 0x0000TTNN then the extents, big-endian.
inline std::vector<uint8_t> idxHeader(uint8_t type, const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> h = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<uint8_t>(d >> s));
  return h;
}

// Deterministic pixel bytes for sample i.
inline uint8_t pixelOf(int64_t i, int64_t p) { return static_cast<uint8_t>((i * 31 + p * 7 + 3) % 256); }

// Writes one split of an MNIST-style IDX dataset of n images of h x w.
// Labels are i % classes. Returns nothing; files go into `dir`.
inline void writeSplit(const std::string& dir, const std::string& prefix, int64_t n, int64_t h, int64_t w,
                       int64_t classes, bool gzip) {
  std::vector<uint8_t> pixels(static_cast<size_t>(n * h * w));
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(i % classes);
    for (int64_t p = 0; p < h * w; ++p) pixels[static_cast<size_t>(i * h * w + p)] = pixelOf(i, p);
  }
  const std::string gz = gzip ? ".gz" : "";
  writeIdx(dir + "/" + prefix + "-images-idx3-ubyte" + gz, kIdxUInt8, {n, h, w}, pixels, gzip);
  writeIdx(dir + "/" + prefix + "-labels-idx1-ubyte" + gz, kIdxUInt8, {n}, labels, gzip);
}

// Runs f, requires it to throw exactly type E, and returns the message.
template <class E, class F>
std::string messageOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("threw the wrong exception type: " << e.what());
  }
  FAIL("did not throw");
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace dtrain::test
