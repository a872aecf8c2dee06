#include "core/train/safetensors.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "test_files.h"

using namespace dtrain;
using dtrain::testing::safetensorsBytes;
using dtrain::testing::TempDir;

namespace {

// Expects readSafetensors(path) to throw CheckpointError whose message names
// the file and contains `fragment`.
void expectRejected(const std::string& path, const std::string& fragment) {
  CAPTURE(fragment);
  try {
    readSafetensors(path);
    FAIL("accepted an invalid file");
  } catch (const CheckpointError& e) {
    std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find(fragment) != std::string::npos);
  }
}

std::string floatBytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

}  // namespace

TEST_CASE("safetensors round trip keeps values, shapes, order and metadata") {
  TempDir tmp;
  std::vector<float> w(2 * 3 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i) - 3.0f;
  std::vector<float> b = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -0.0f, 1e-45f};
  float scalar = 42.0f;
  std::vector<NamedTensorView> tensors = {
      {"conv1.weight", Shape{2, 3, 4}, w.data()},
      {"conv1.bias", Shape{4}, b.data()},
      {"empty", Shape{0, 3}, nullptr},
      {"scalar", Shape{}, &scalar},
  };
  std::map<std::string, std::string> meta = {
      {"format", "dtrain"}, {"note", "quote\" and é"}, {"", "empty key"}};
  std::string path = tmp / "m.safetensors";
  FileDigest digest;
  writeSafetensors(path, tensors, meta, &digest);
  CHECK(digest.bytes == dtrain::testing::readBytes(path).size());

  SafetensorsFile f = readSafetensors(path);
  CHECK(f.metadata == meta);
  REQUIRE(f.tensors.size() == 4);
  CHECK(f.tensors[0].name == "conv1.weight");
  CHECK(f.tensors[0].shape == Shape{2, 3, 4});
  CHECK(f.tensors[0].data == w);
  CHECK(f.tensors[1].name == "conv1.bias");
  REQUIRE(f.tensors[1].data.size() == 4);
  CHECK(std::memcmp(f.tensors[1].data.data(), b.data(), 16) == 0);  // bitwise: NaN, -0, denormal
  CHECK(f.tensors[2].shape == Shape{0, 3});
  CHECK(f.tensors[2].data.empty());
  CHECK(f.tensors[3].shape == Shape{});
  REQUIRE(f.tensors[3].data.size() == 1);
  CHECK(f.tensors[3].data[0] == 42.0f);
  REQUIRE(f.find("conv1.bias") != nullptr);
  CHECK(f.find("nope") == nullptr);
}

TEST_CASE("safetensors byte layout of a tiny file, checked by hand") {
  TempDir tmp;
  std::string path = tmp / "tiny.safetensors";
  float a[2] = {1.0f, 2.0f};
  float b[1] = {-1.0f};
  writeSafetensors(path, {{"a", Shape{2}, a}, {"b", Shape{1, 1}, b}}, {{"k", "v"}});
  std::string bytes = dtrain::testing::readBytes(path);

  // {"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
  //  "b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}
  // = 26 + 52 + 1 + 55 + 1 = 135 bytes of JSON, padded with 1 space to N = 136, so
  // the data starts at 8 + 136 = 144, a multiple of 8.
  const std::string json =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}";
  REQUIRE(json.size() == 135);
  REQUIRE(bytes.size() == 8 + 136 + 12);
  const unsigned char len[8] = {136, 0, 0, 0, 0, 0, 0, 0};  // little-endian u64
  CHECK(std::memcmp(bytes.data(), len, 8) == 0);
  CHECK(bytes.substr(8, 135) == json);
  CHECK(bytes.substr(8 + 135, 1) == " ");
  // IEEE-754 little-endian: 1.0f = 0x3f800000, 2.0f = 0x40000000, -1.0f = 0xbf800000.
  const unsigned char data[12] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x80, 0xbf};
  CHECK(std::memcmp(bytes.data() + 144, data, 12) == 0);
}

TEST_CASE("safetensors with no tensors and no metadata") {
  TempDir tmp;
  std::string path = tmp / "empty.safetensors";
  writeSafetensors(path, {}, {});
  std::string bytes = dtrain::testing::readBytes(path);
  CHECK(bytes == safetensorsBytes("{}      ", ""));
  SafetensorsFile f = readSafetensors(path);
  CHECK(f.tensors.empty());
  CHECK(f.metadata.empty());
}

TEST_CASE("safetensors reader accepts other writers' header order") {
  TempDir tmp;
  std::string path = tmp / "order.safetensors";
  // "b" is listed first but its data comes second; no padding (older writers).
  dtrain::testing::writeBytes(
      path, safetensorsBytes("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                             floatBytes({1.0f, 2.0f})));
  SafetensorsFile f = readSafetensors(path);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].name == "a");
  CHECK(f.tensors[0].data[0] == 1.0f);
  CHECK(f.tensors[1].name == "b");
  CHECK(f.tensors[1].data[0] == 2.0f);
}

TEST_CASE("safetensors reader rejects damaged files") {
  TempDir tmp;
  std::string good = tmp / "good.safetensors";
  float v[4] = {1, 2, 3, 4};
  writeSafetensors(good, {{"w", Shape{2, 2}, v}}, {});
  const std::string bytes = dtrain::testing::readBytes(good);
  std::string path = tmp / "bad.safetensors";
  auto craft = [&](const std::string& header, const std::string& data) {
    dtrain::testing::writeBytes(path, safetensorsBytes(header, data));
  };
  const std::string d16 = floatBytes({1, 2, 3, 4});

  SUBCASE("truncated data") {
    dtrain::testing::writeBytes(path, bytes.substr(0, bytes.size() - 4));
    expectRejected(path, "run past the end of the data");
  }
  SUBCASE("truncated inside the header") {
    dtrain::testing::writeBytes(path, bytes.substr(0, 20));
    expectRejected(path, "exceeds the");
  }
  SUBCASE("shorter than the length field") {
    dtrain::testing::writeBytes(path, bytes.substr(0, 5));
    expectRejected(path, "too short");
  }
  SUBCASE("empty file") {
    dtrain::testing::writeBytes(path, "");
    expectRejected(path, "too short");
  }
  SUBCASE("header length larger than the file") {
    std::string b = bytes;
    b[3] = 1;  // + 16 MiB
    dtrain::testing::writeBytes(path, b);
    expectRejected(path, "header length");
  }
  SUBCASE("absurd header length") {
    std::string b = bytes;
    b[7] = static_cast<char>(0xFF);
    dtrain::testing::writeBytes(path, b);
    expectRejected(path, "header length");
  }
  SUBCASE("bad JSON") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},}", d16);
    expectRejected(path, "not valid JSON");
  }
  SUBCASE("header not JSON at all") {
    std::string b = bytes;
    b[8] = 'x';
    dtrain::testing::writeBytes(path, b);
    expectRejected(path, "does not start with '{'");
  }
  SUBCASE("wrong dtype") {
    craft("{\"w\":{\"dtype\":\"F16\",\"shape\":[2,4],\"data_offsets\":[0,16]}}", d16);
    expectRejected(path, "dtype F16; only F32");
  }
  SUBCASE("missing field") {
    craft("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", d16);
    expectRejected(path, "lacks one of");
  }
  SUBCASE("overlapping offsets") {
    craft(
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        d16);
    expectRejected(path, "overlap");
  }
  SUBCASE("gap between tensors") {
    craft(
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
        d16);
    expectRejected(path, "gap");
  }
  SUBCASE("offsets beyond the data") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", d16);
    expectRejected(path, "run past the end");
  }
  SUBCASE("huge offsets") {
    craft(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[18446744073709551608,18446744073709551612]"
        "}}",
        d16);
    expectRejected(path, "non-negative integer");
  }
  SUBCASE("end before begin") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}", d16);
    expectRejected(path, "end before they begin");
  }
  SUBCASE("shape does not match the byte span") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", d16);
    expectRejected(path, "span 16 bytes");
  }
  SUBCASE("shape overflows") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", d16);
    expectRejected(path, "too many");
  }
  SUBCASE("negative extent") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", d16);
    expectRejected(path, "non-negative integer");
  }
  SUBCASE("trailing bytes after the last tensor") {
    craft("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d16);
    expectRejected(path, "trailing");
  }
  SUBCASE("duplicate tensor names") {
    craft(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
        d16);
    expectRejected(path, "duplicate key");
  }
  SUBCASE("non-string metadata") {
    craft("{\"__metadata__\":{\"n\":1},\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
          d16);
    expectRejected(path, "expected a string");
  }
  SUBCASE("deeply nested header") {
    craft("{\"w\":" + std::string(100000, '[') + "}", d16);
    expectRejected(path, "not valid JSON");
  }
}

TEST_CASE("safetensors reader: missing file is an IoError naming it") {
  TempDir tmp;
  std::string path = tmp / "absent.safetensors";
  try {
    readSafetensors(path);
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find("No such file") != std::string::npos);
  }
}

TEST_CASE("safetensors writer rejects invalid tensor lists before writing") {
  TempDir tmp;
  std::string path = tmp / "x.safetensors";
  float v[2] = {1, 2};
  CHECK_THROWS_AS(writeSafetensors(path, {{"a", Shape{2}, v}, {"a", Shape{2}, v}}, {}), Error);
  CHECK_THROWS_AS(writeSafetensors(path, {{"__metadata__", Shape{2}, v}}, {}), Error);
  CHECK_THROWS_AS(writeSafetensors(path, {{"", Shape{2}, v}}, {}), Error);
  CHECK_THROWS_AS(writeSafetensors(path, {{"a", Shape{2}, nullptr}}, {}), Error);
  CHECK_THROWS_AS(writeSafetensors(path, {{"a", Shape{-1}, v}}, {}), Error);
  CHECK_FALSE(dtrain::testing::exists(path));
}

TEST_CASE("safetensors writer reports I/O failures with the path and reason") {
  TempDir tmp;
  float v[2] = {1, 2};
  std::string path = tmp / "no-such-dir/x.safetensors";
  try {
    writeSafetensors(path, {{"a", Shape{2}, v}}, {});
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find("No such file or directory") != std::string::npos);
  }
  struct stat st;
  if (::stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
    std::vector<float> big(1 << 16, 1.0f);
    try {
      writeSafetensors("/dev/full", {{"a", Shape{static_cast<int64_t>(big.size())}, big.data()}}, {});
      FAIL("no error");
    } catch (const IoError& e) {
      CHECK(std::string(e.what()).find("No space left on device") != std::string::npos);
    }
    CHECK(dtrain::testing::exists("/dev/full"));  // devices are never deleted
  }
}
