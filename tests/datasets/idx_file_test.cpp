#include "datasets/idx_file.h"

#include <doctest/doctest.h>

#include "core/errors.h"
#include "test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {
std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + 5);
  return v;
}
}  // namespace

TEST_CASE("idx: raw and gzip files read back exactly") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    CAPTURE(gzip);
    const std::string images = dir.file(gzip ? "img.gz" : "img");
    const std::string labels = dir.file(gzip ? "lab.gz" : "lab");
    const auto pixels = ramp(5 * 3 * 4);
    const auto label_bytes = ramp(5);
    writeIdx(images, kIdxUInt8, {5, 3, 4}, pixels, gzip);
    writeIdx(labels, kIdxUInt8, {5}, label_bytes, gzip);

    // The writer produces the documented layout: magic, big-endian dims, data.
    if (!gzip) {
      auto raw = readBytes(images);
      REQUIRE(raw.size() == 16 + pixels.size());
      CHECK(raw[2] == 0x08);
      CHECK(raw[3] == 3);
      CHECK(raw[7] == 5);
      CHECK(raw[11] == 3);
      CHECK(raw[15] == 4);
    } else {
      auto raw = readBytes(images);
      CHECK(raw[0] == 0x1f);
      CHECK(raw[1] == 0x8b);
    }

    IdxArray a = readIdx(images, 3);
    CHECK(a.dims == std::vector<int64_t>{5, 3, 4});
    CHECK(a.data == pixels);
    IdxArray l = readIdx(labels, 1);
    CHECK(l.dims == std::vector<int64_t>{5});
    CHECK(l.data == label_bytes);
  }
}

TEST_CASE("idx: gzip is detected by content, not by the file name") {
  TempDir dir;
  const auto pixels = ramp(2 * 2 * 2);
  writeIdx(dir.file("gzipped-without-suffix"), kIdxUInt8, {2, 2, 2}, pixels, true);
  writeIdx(dir.file("raw-with-suffix.gz"), kIdxUInt8, {2, 2, 2}, pixels, false);
  CHECK(readIdx(dir.file("gzipped-without-suffix"), 3).data == pixels);
  CHECK(readIdx(dir.file("raw-with-suffix.gz"), 3).data == pixels);
}

TEST_CASE("idx: bad magic is a DataError naming the file and the magic") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "bad.gz" : "bad");
    std::vector<uint8_t> bytes = {0x12, 0x34, 0xab, 0xcd, 0, 0, 0, 1, 0};
    writeBytes(path, bytes, gzip);
    std::string msg = messageOf<DataError>([&] { readIdx(path, 3); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "not an IDX file"));
    CHECK(contains(msg, "0x1234abcd"));
    CHECK(contains(msg, "0x00000803"));
  }
  // Too short to hold a magic at all.
  const std::string tiny = dir.file("tiny");
  writeBytes(tiny, {0, 0});
  CHECK(contains(messageOf<DataError>([&] { readIdx(tiny, 1); }), tiny));
  const std::string empty = dir.file("empty");
  writeBytes(empty, {});
  CHECK(contains(messageOf<DataError>([&] { readIdx(empty, 1); }), empty));
}

TEST_CASE("idx: a type byte other than 0x08 is a DataError") {
  TempDir dir;
  const std::string path = dir.file("floats");
  writeIdx(path, 0x0D, {2, 2, 2}, std::vector<uint8_t>(2 * 2 * 2 * 4, 0), false);
  std::string msg = messageOf<DataError>([&] { readIdx(path, 3); });
  CHECK(contains(msg, path));
  CHECK(contains(msg, "0x0d"));
}

TEST_CASE("idx: the wrong number of dimensions is a DataError (swapped files)") {
  TempDir dir;
  const std::string labels = dir.file("labels");
  writeIdx(labels, kIdxUInt8, {4}, ramp(4), false);
  std::string msg = messageOf<DataError>([&] { readIdx(labels, 3); });
  CHECK(contains(msg, labels));
  CHECK(contains(msg, "swapped"));
}

TEST_CASE("idx: truncated data is a DataError with expected and actual sizes") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "short.gz" : "short");
    std::vector<uint8_t> bytes = idxHeader(0x08, {10, 28, 28});
    bytes.resize(bytes.size() + 1000 - 16, 7);  // 1000 bytes in all
    writeBytes(path, bytes, gzip);
    std::string msg = messageOf<DataError>([&] { readIdx(path, 3); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "truncated IDX file: expected 7856 bytes of data, got 1000"));
    CHECK(contains(msg, "re-download"));
  }
  // A header cut short.
  const std::string head = dir.file("head");
  std::vector<uint8_t> bytes = idxHeader(0x08, {10, 28, 28});
  bytes.resize(10);
  writeBytes(head, bytes);
  std::string msg = messageOf<DataError>([&] { readIdx(head, 3); });
  CHECK(contains(msg, head));
  CHECK(contains(msg, "truncated IDX header"));
}

TEST_CASE("idx: trailing bytes are a DataError") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "long.gz" : "long");
    std::vector<uint8_t> bytes = idxHeader(0x08, {3});
    bytes.insert(bytes.end(), {1, 2, 3, 4, 5});
    writeBytes(path, bytes, gzip);
    std::string msg = messageOf<DataError>([&] { readIdx(path, 1); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "2 unexpected trailing bytes"));
  }
}

TEST_CASE("idx: a zero dimension is a DataError") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "zero.gz" : "zero");
    writeIdx(path, kIdxUInt8, {4, 0, 28}, {}, gzip);
    std::string msg = messageOf<DataError>([&] { readIdx(path, 3); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "is 0"));
  }
}

TEST_CASE("idx: an implausibly large header fails without a huge allocation") {
  TempDir dir;
  const std::string path = dir.file("huge");
  std::vector<uint8_t> bytes = idxHeader(0x08, {0xffffffffu, 0xffffffffu, 0xffffffffu});
  writeBytes(path, bytes);
  CHECK(contains(messageOf<DataError>([&] { readIdx(path, 3); }), path));
  // Large but not absurd (about 4 GB): fails as truncated after reading what is there.
  const std::string big = dir.file("big");
  bytes = idxHeader(0x08, {65536, 256, 256});
  bytes.resize(bytes.size() + 100, 1);
  writeBytes(big, bytes, true);
  CHECK(contains(messageOf<DataError>([&] { readIdx(big, 3); }), "truncated IDX file"));
}

TEST_CASE("idx: a missing file is an IoError naming it") {
  TempDir dir;
  const std::string path = dir.file("nope-idx3-ubyte");
  std::string msg = messageOf<IoError>([&] { readIdx(path, 3); });
  CHECK(contains(msg, path));
  CHECK(contains(messageOf<IoError>([&] { readIdx(dir.str(), 3); }), dir.str()));
}

TEST_CASE("idx: corrupt gzip data is a DataError naming the file") {
  TempDir dir;
  const std::string good = dir.file("good.gz");
  std::vector<uint8_t> pixels(64 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * i) >> 3);
  writeIdx(good, kIdxUInt8, {64, 28, 28}, pixels, true);
  std::vector<uint8_t> gz = readBytes(good);
  REQUIRE(gz.size() > 100);

  SUBCASE("flipped bytes in the compressed stream") {
    auto bad = gz;
    for (size_t i = 30; i < bad.size() - 20; i += 7) bad[i] ^= 0x5a;
    const std::string path = dir.file("flipped.gz");
    writeBytes(path, bad);
    CHECK(contains(messageOf<DataError>([&] { readIdx(path, 3); }), path));
  }
  SUBCASE("a wrong checksum") {
    auto bad = gz;
    bad[bad.size() - 6] ^= 0xff;  // CRC-32 in the gzip trailer
    const std::string path = dir.file("crc.gz");
    writeBytes(path, bad);
    std::string msg = messageOf<DataError>([&] { readIdx(path, 3); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "corrupt gzip"));
  }
  SUBCASE("the compressed stream cut short") {
    auto bad = gz;
    bad.resize(bad.size() / 2);
    const std::string path = dir.file("cut.gz");
    writeBytes(path, bad);
    CHECK(contains(messageOf<DataError>([&] { readIdx(path, 3); }), path));
  }
  SUBCASE("only the gzip trailer missing") {
    auto bad = gz;
    bad.resize(bad.size() - 8);
    const std::string path = dir.file("notrailer.gz");
    writeBytes(path, bad);
    CHECK(contains(messageOf<DataError>([&] { readIdx(path, 3); }), path));
  }
}

TEST_CASE("idx: writeIdx rejects inconsistent arguments") {
  TempDir dir;
  CHECK_THROWS_AS(writeIdx(dir.file("x"), kIdxUInt8, {2, 2}, std::vector<uint8_t>(3), false), Error);
  CHECK_THROWS_AS(writeIdx(dir.file("x"), 0x42, {2}, std::vector<uint8_t>(2), false), Error);
  CHECK_THROWS_AS(writeIdx(dir.file("x"), kIdxUInt8, {}, {}, false), Error);
  CHECK_THROWS_AS(writeIdx(dir.file("no-such-dir/x"), kIdxUInt8, {1}, {1}, false), IoError);
}
