#include "core/io/file_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "core/errors.h"
#include "core/io/crc32.h"
#include "core/io/fs_ops.h"

namespace dtrain {

FileSource::FileSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throwIoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throwIoError("cannot inspect", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IoError("cannot read " + path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);  // read-only: a close error loses nothing
}

void FileSource::readAt(void* dst, size_t n, uint64_t offset) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throwIoError("cannot read", path_, errno);
    }
    if (r == 0)
      throw IoError("cannot read " + path_ + ": unexpected end of file at byte " + std::to_string(offset) +
                    " (was it changed while being read?)");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

std::string readWholeFile(const std::string& path) {
  FileSource src(path);
  std::string s(static_cast<size_t>(src.size()), '\0');
  src.readAt(s.data(), s.size(), 0);
  return s;
}

FileDigest digestFile(const std::string& path) {
  FileSource src(path);
  FileDigest d;
  std::vector<char> buf(size_t{1} << 20);
  while (d.bytes < src.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), src.size() - d.bytes));
    src.readAt(buf.data(), n, d.bytes);
    d.crc32 = crc32Update(d.crc32, buf.data(), n);
    d.bytes += n;
  }
  return d;
}

}  // namespace dtrain
