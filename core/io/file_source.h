// FileSource: random-access reads of one existing file with every error
// checked. Owns its descriptor; not thread-safe; blocking.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/io/file_sink.h"

namespace dtrain {

class FileSource {
 public:
  // Opens `path` for reading. Throws IoError (missing file, permission denied,
  // or a directory).
  explicit FileSource(const std::string& path);
  ~FileSource();
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  // Size in bytes at open time.
  uint64_t size() const { return size_; }
  // Reads exactly `n` bytes at `offset`. Throws IoError on failure or when the
  // file ends early (it shrank after it was opened).
  void readAt(void* dst, size_t n, uint64_t offset) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole file as bytes. Throws IoError.
std::string readWholeFile(const std::string& path);
// Size and CRC-32 of the whole file, read in chunks. Throws IoError.
FileDigest digestFile(const std::string& path);

}  // namespace dtrain
