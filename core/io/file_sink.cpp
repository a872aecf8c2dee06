#include "core/io/file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/errors.h"
#include "core/io/crc32.h"
#include "core/io/fs_ops.h"

namespace dtrain {

FileSink::FileSink(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throwIoError("cannot create", path, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    discard();
    throwIoError("cannot inspect", path, err);
  }
  is_regular_ = S_ISREG(st.st_mode);
}

FileSink::~FileSink() {
  if (fd_ >= 0) discard();
}

void FileSink::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);  // nothing useful to do about a close error here
  fd_ = -1;
  if (is_regular_) ::unlink(path_.c_str());
  is_regular_ = false;
}

void FileSink::write(const void* data, size_t n) {
  if (fd_ < 0) throw IoError("cannot write " + path_ + ": the file is already closed");
  const char* p = static_cast<const char*>(data);
  digest_.crc32 = crc32Update(digest_.crc32, p, n);
  digest_.bytes += n;
  while (n > 0) {
    // Linux caps one write at about 2 GiB; stay below it.
    ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      discard();
      throwIoError("cannot write", path_, err);
    }
    if (w == 0) {
      discard();
      throwIoError("cannot write", path_, ENOSPC);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void FileSink::finish() {
  if (fd_ < 0) throw IoError("cannot finish " + path_ + ": the file is already closed");
  // Regular files must reach the disk; devices and pipes (tests, /dev/stdout)
  // may not support fsync, which is harmless for them.
  if (::fsync(fd_) != 0 && (is_regular_ || (errno != EINVAL && errno != EROFS))) {
    int err = errno;
    discard();
    throwIoError("cannot flush", path_, err);
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    if (is_regular_) ::unlink(path_.c_str());
    throwIoError("cannot close", path_, err);
  }
}

FileDigest writeFileDurably(const std::string& path, const std::string& contents) {
  FileSink sink(path);
  sink.write(contents);
  sink.finish();
  return sink.digest();
}

}  // namespace dtrain
