#include "core/io/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/errors.h"
#include "core/io/crc32c.h"
#include "core/io/fs_ops.h"

namespace dtrain {

namespace {

// The few protobuf wire-format pieces tensorflow.Event needs.
// Field key = (field number << 3) | wire type.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putKey(std::string& out, uint32_t field, WireType type) {
  putVarint(out, (uint64_t{field} << 3) | type);
}

void putLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// int64 fields are the varint of the two's-complement value (10 bytes when negative).
void putInt64(std::string& out, uint32_t field, int64_t v) {
  putKey(out, field, kVarint);
  putVarint(out, static_cast<uint64_t>(v));
}

void putDouble(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  putKey(out, field, kFixed64);
  putLittleEndian(out, bits, 8);
}

void putFloat(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  putKey(out, field, kFixed32);
  putLittleEndian(out, bits, 4);
}

// A string, bytes or embedded message.
void putBytes(std::string& out, uint32_t field, const std::string& bytes) {
  putKey(out, field, kLengthDelimited);
  putVarint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event fields.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                   kEventSessionLog = 6;
// Summary { repeated Value value = 1 }; Value { string tag = 1; float simple_value = 2 }.
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
// SessionLog { SessionStatus status = 1 }, START = 1.
constexpr uint32_t kSessionLogStatus = 1, kSessionStart = 1;

std::string eventHeader(double wall_time, int64_t step) {
  std::string event;
  putDouble(event, kEventWallTime, wall_time);
  putInt64(event, kEventStep, step);
  return event;
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Opens a file that did not exist: a second writer in the same directory and
// second (a quick restart) gets a numbered name that sorts after the first.
int createEventFile(const std::string& dir, std::string& path) {
  std::string base = dir + "/events.out.tfevents." +
                     std::to_string(static_cast<long long>(unixSecondsNow())) + "." + hostName();
  for (int attempt = 0;; ++attempt) {
    path = attempt == 0 ? base : base + "." + std::to_string(attempt);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt == 999) throwIoError("cannot create TensorBoard event file", path, errno);
  }
}

}  // namespace

double unixSecondsNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int64_t resume_step) {
  makeDirectories(dir);
  fd_ = createEventFile(stripTrailingSlashes(dir), path_);
  double now = unixSecondsNow();
  try {
    std::string version = eventHeader(now, 0);
    putBytes(version, kEventFileVersion, "brain.Event:2");
    writeRecord(version);
    if (resume_step >= 0) {
      std::string session_log;
      putKey(session_log, kSessionLogStatus, kVarint);
      putVarint(session_log, kSessionStart);
      std::string start = eventHeader(now, resume_step + 1);
      putBytes(start, kEventSessionLog, session_log);
      writeRecord(start);
    }
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());  // a file without its version event is no use to anyone
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);  // every record is already in the kernel; nothing to report here
}

void TensorBoardWriter::scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values,
                                double wall_time) {
  if (values.empty()) return;
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    putBytes(v, kValueTag, tag);
    putFloat(v, kValueSimpleValue, value);
    putBytes(summary, kSummaryValue, v);
  }
  std::string event = eventHeader(wall_time, step);
  putBytes(event, kEventSummary, summary);
  writeRecord(event);
}

void TensorBoardWriter::writeRecord(const std::string& event) {
  std::string record;
  record.reserve(event.size() + 16);
  putLittleEndian(record, event.size(), 8);
  putLittleEndian(record, maskedCrc32c(record.data(), 8), 4);
  record += event;
  putLittleEndian(record, maskedCrc32c(event.data(), event.size()), 4);

  // One write() normally takes the whole record; the loop covers the rare
  // short write (a signal, a nearly full disk).
  size_t done = 0;
  while (done < record.size()) {
    ssize_t w = ::write(fd_, record.data() + done, record.size() - done);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    int err = w < 0 ? errno : ENOSPC;
    // Cut the partial record off so later events still follow a clean file.
    if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) ::lseek(fd_, static_cast<off_t>(bytes_), SEEK_SET);
    throwIoError("cannot write TensorBoard event file", path_, err);
  }
  bytes_ += record.size();
}

void TensorBoardWriter::flush() {
  if (::fsync(fd_) != 0) throwIoError("cannot flush TensorBoard event file", path_, errno);
}

}  // namespace dtrain
