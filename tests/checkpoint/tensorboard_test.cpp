#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "core/errors.h"
#include "core/io/crc32c.h"
#include "core/io/tensorboard_writer.h"
#include "test_files.h"

using namespace dtrain;
using dtrain::testing::TempDir;

namespace {

// An independent reader of what the writer produced: TFRecord framing with
// both masked CRC-32C checks, then the protobuf fields of tensorflow.Event by
// hand. Any malformed byte throws std::runtime_error.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  int64_t session_status = -1;  // SessionLog.status; -1 without a session_log
  std::vector<std::pair<std::string, float>> values;
};

class ProtoReader {
 public:
  explicit ProtoReader(const std::string& bytes) : b_(bytes) {}
  bool done() const { return pos_ == b_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = next();
      v |= uint64_t{byte & 0x7Fu} << shift;
      if (!(byte & 0x80)) return v;
    }
    throw std::runtime_error("varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{next()} << (8 * i);
    return v;
  }
  std::string bytes() {
    uint64_t n = varint();
    if (n > b_.size() - pos_) throw std::runtime_error("length-delimited field runs past its message");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  double float64() {
    uint64_t bits = fixed(8);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  float float32() {
    auto bits = static_cast<uint32_t>(fixed(4));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        break;
      case 1:
        fixed(8);
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed(4);
        break;
      default:
        throw std::runtime_error("unknown wire type " + std::to_string(wire_type));
    }
  }

 private:
  uint8_t next() {
    if (pos_ >= b_.size()) throw std::runtime_error("message ends inside a field");
    return static_cast<uint8_t>(b_[pos_++]);
  }
  const std::string& b_;
  size_t pos_ = 0;
};

// Checks a field's wire type before reading it as that type.
void expectWire(uint32_t got, uint32_t want, const char* what) {
  if (got != want) throw std::runtime_error(std::string(what) + " has wire type " + std::to_string(got));
}

std::pair<std::string, float> decodeValue(const std::string& bytes) {
  ProtoReader r(bytes);
  std::pair<std::string, float> v{"", std::numeric_limits<float>::quiet_NaN()};
  while (!r.done()) {
    uint64_t key = r.varint();
    auto field = key >> 3;
    auto wire = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      expectWire(wire, 2, "Value.tag");
      v.first = r.bytes();
    } else if (field == 2) {
      expectWire(wire, 5, "Value.simple_value");
      v.second = r.float32();
    } else {
      r.skip(wire);
    }
  }
  return v;
}

DecodedEvent decodeEvent(const std::string& bytes) {
  DecodedEvent e;
  ProtoReader r(bytes);
  while (!r.done()) {
    uint64_t key = r.varint();
    auto field = key >> 3;
    auto wire = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      expectWire(wire, 1, "Event.wall_time");
      e.wall_time = r.float64();
    } else if (field == 2) {
      expectWire(wire, 0, "Event.step");
      e.step = static_cast<int64_t>(r.varint());
    } else if (field == 3) {
      expectWire(wire, 2, "Event.file_version");
      e.file_version = r.bytes();
    } else if (field == 5) {
      expectWire(wire, 2, "Event.summary");
      std::string summary = r.bytes();
      ProtoReader s(summary);
      while (!s.done()) {
        uint64_t skey = s.varint();
        if ((skey >> 3) == 1) {
          expectWire(static_cast<uint32_t>(skey & 7), 2, "Summary.value");
          e.values.push_back(decodeValue(s.bytes()));
        } else {
          s.skip(static_cast<uint32_t>(skey & 7));
        }
      }
    } else if (field == 6) {
      expectWire(wire, 2, "Event.session_log");
      std::string log = r.bytes();
      ProtoReader l(log);
      while (!l.done()) {
        uint64_t lkey = l.varint();
        if ((lkey >> 3) == 1)
          e.session_status = static_cast<int64_t>(l.varint());
        else
          l.skip(static_cast<uint32_t>(lkey & 7));
      }
    } else {
      r.skip(wire);
    }
  }
  return e;
}

uint64_t littleEndianAt(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(b[at + i])} << (8 * i);
  return v;
}

std::vector<DecodedEvent> readEventFile(const std::string& path) {
  std::string b = dtrain::testing::readBytes(path);
  std::vector<DecodedEvent> events;
  size_t pos = 0;
  while (pos < b.size()) {
    if (b.size() - pos < 12) throw std::runtime_error("truncated record header");
    uint64_t length = littleEndianAt(b, pos, 8);
    if (littleEndianAt(b, pos + 8, 4) != maskedCrc32c(b.data() + pos, 8))
      throw std::runtime_error("length crc mismatch at offset " + std::to_string(pos));
    if (b.size() - pos - 12 < length + 4) throw std::runtime_error("truncated record data");
    std::string data = b.substr(pos + 12, length);
    if (littleEndianAt(b, pos + 12 + length, 4) != maskedCrc32c(data.data(), data.size()))
      throw std::runtime_error("data crc mismatch at offset " + std::to_string(pos));
    events.push_back(decodeEvent(data));
    pos += 12 + length + 4;
  }
  return events;
}

std::vector<std::string> eventFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("crc32c: known values, masking") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  std::string zeros(32, '\0');
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  std::string ones(32, '\xFF');
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);  // RFC 3720 B.4
  CHECK(crc32c("", 0) == 0u);
  // A file_version event's bytes and the masked CRC a real TensorFlow event
  // file stored for them (TensorBoard's own reader tests use this pair).
  CHECK(maskedCrc32c("\x1a\x11"
                     "CRC test, one two",
                     19) == 0x5794D08Au);
  // Rotate right by 15, add 0xA282EAD8.
  CHECK(maskCrc32c(0) == 0xA282EAD8u);
  CHECK(maskCrc32c(0x00008000u) == 0xA282EAD9u);
  CHECK(maskCrc32c(0x00000001u) == 0xA282EAD8u + 0x00020000u);
  CHECK(maskedCrc32c("123456789", 9) == maskCrc32c(0xE3069283u));
}

TEST_CASE("tensorboard writer: version event, scalars read back exactly, wall time in order") {
  TempDir tmp("tb");
  std::string dir = tmp / "run/tensorboard";  // created, parents included
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    w.scalars(1, {{"train/loss", 2.302585f}, {"train/accuracy", 0.125f}, {"train/lr", 0.1f}});
    w.scalars(2, {{"train/loss", 1.5f}, {"train/images_per_s", 12345.678f}, {"train/step_time_s", 1e-30f}});
    w.scalars(2, {});  // nothing written
    w.scalars(300, {{"test/accuracy", -0.0f}, {"test/loss", 3.4028235e38f}});
    w.scalars(-1, {{"odd", 7.0f}}, 1.0e9);  // negative step: a 10-byte varint
    w.flush();
  }
  REQUIRE(eventFiles(dir) == std::vector<std::string>{path});
  std::string name = std::filesystem::path(path).filename().string();
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);

  std::vector<DecodedEvent> events = readEventFile(path);
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].values.empty());
  CHECK(events[0].session_status == -1);
  double now = unixSecondsNow();
  CHECK(events[0].wall_time > now - 60);
  CHECK(events[0].wall_time <= now);
  for (size_t i = 1; i < 4; ++i) {
    CHECK(events[i].file_version.empty());
    CHECK(events[i].wall_time >= events[i - 1].wall_time);
  }
  // The file name carries the creation second.
  CHECK(name.find("." + std::to_string(static_cast<long long>(events[0].wall_time)) + ".") !=
        std::string::npos);

  CHECK(events[1].step == 1);
  REQUIRE(events[1].values.size() == 3);
  CHECK(events[1].values[0].first == "train/loss");
  CHECK(sameBits(events[1].values[0].second, 2.302585f));
  CHECK(events[1].values[1].first == "train/accuracy");
  CHECK(sameBits(events[1].values[1].second, 0.125f));
  CHECK(events[1].values[2].first == "train/lr");
  CHECK(sameBits(events[1].values[2].second, 0.1f));

  CHECK(events[2].step == 2);
  REQUIRE(events[2].values.size() == 3);
  CHECK(events[2].values[1].first == "train/images_per_s");
  CHECK(sameBits(events[2].values[1].second, 12345.678f));
  CHECK(events[2].values[2].first == "train/step_time_s");
  CHECK(sameBits(events[2].values[2].second, 1e-30f));

  CHECK(events[3].step == 300);
  REQUIRE(events[3].values.size() == 2);
  CHECK(sameBits(events[3].values[0].second, -0.0f));
  CHECK(sameBits(events[3].values[1].second, 3.4028235e38f));

  CHECK(events[4].step == -1);
  CHECK(events[4].wall_time == 1.0e9);
  REQUIRE(events[4].values.size() == 1);
  CHECK(events[4].values[0].first == "odd");
  CHECK(sameBits(events[4].values[0].second, 7.0f));
}

TEST_CASE("tensorboard writer: a flipped byte fails the record's CRC") {
  TempDir tmp("tb");
  std::string path;
  {
    TensorBoardWriter w(tmp.path());
    path = w.path();
    w.scalars(5, {{"loss", 0.5f}});
  }
  REQUIRE(readEventFile(path).size() == 2);
  std::string clean = dtrain::testing::readBytes(path);

  dtrain::testing::flipByte(path, -6);  // inside the last event's float
  CHECK_THROWS_WITH_AS(readEventFile(path), doctest::Contains("data crc mismatch"), std::runtime_error);

  dtrain::testing::writeBytes(path, clean);
  size_t first_record = 12 + littleEndianAt(clean, 0, 8) + 4;
  dtrain::testing::flipByte(path, static_cast<int64_t>(first_record));  // the second record's length
  CHECK_THROWS_WITH_AS(readEventFile(path), doctest::Contains("length crc mismatch"), std::runtime_error);
}

TEST_CASE("tensorboard writer: a resumed run marks its restart; writers never share a file") {
  TempDir tmp("tb");
  std::string first, second;
  {
    TensorBoardWriter a(tmp.path());
    TensorBoardWriter b(tmp.path(), /*resume_step=*/40);  // likely the same second: a numbered name
    first = a.path();
    second = b.path();
    b.scalars(41, {{"loss", 0.25f}});
  }
  CHECK(first != second);
  CHECK(eventFiles(tmp.path()) == std::vector<std::string>{std::min(first, second), std::max(first, second)});
  CHECK(readEventFile(first).size() == 1);
  std::vector<DecodedEvent> events = readEventFile(second);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[1].session_status == 1);  // SessionLog.START: TensorBoard drops steps >= 41 seen before
  CHECK(events[1].step == 41);
  CHECK(events[2].step == 41);
  CHECK(sameBits(events[2].values.at(0).second, 0.25f));
}

TEST_CASE("tensorboard writer: an unusable directory is an IoError naming it") {
  TempDir tmp("tb");
  std::string file = tmp.write("not-a-dir", "x");
  CHECK_THROWS_WITH_AS(TensorBoardWriter(file + "/tensorboard"), doctest::Contains(file.c_str()), IoError);
}
