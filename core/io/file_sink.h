// FileSink: writes one new file sequentially and durably. Tracks the byte
// count and CRC-32 of everything written so callers can record a checksum
// without reading the file back. finish() fsyncs and closes; a sink destroyed
// without finish() (an exception unwound past it) closes and deletes its
// half-written file. Owns its descriptor; not thread-safe; blocking.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain {

// Size and CRC-32 of a whole file.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

class FileSink {
 public:
  // Creates or truncates `path` (mode 0644). Throws IoError.
  explicit FileSink(const std::string& path);
  ~FileSink();
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Writes all `n` bytes (retrying short writes). Throws IoError (e.g. disk full).
  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // fsync + close. Throws IoError; after a failure the file is deleted.
  void finish();

  FileDigest digest() const { return digest_; }
  const std::string& path() const { return path_; }

 private:
  void discard() noexcept;

  std::string path_;
  int fd_ = -1;
  bool is_regular_ = false;  // only regular files are deleted on failure
  FileDigest digest_;
};

// Writes `contents` to `path` through a FileSink; returns its digest.
FileDigest writeFileDurably(const std::string& path, const std::string& contents);

}  // namespace dtrain
