#include "core/io/fs_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/errors.h"

namespace dtrain {

std::string errnoText(int err) { return std::generic_category().message(err); }

void throwIoError(const std::string& what, const std::string& path, int err) {
  throw IoError(what + " " + path + ": " + errnoText(err));
}

bool pathExists(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  throwIoError("cannot inspect", path, errno);
}

bool isDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  if (errno == ENOENT || errno == ENOTDIR) return false;
  throwIoError("cannot inspect", path, errno);
}

void makeDirectories(const std::string& path) {
  std::string p = stripTrailingSlashes(path);
  if (p.empty() || isDirectory(p)) return;
  std::string parent = parentPath(p);
  if (parent != p) makeDirectories(parent);
  if (::mkdir(p.c_str(), 0755) != 0) {
    int err = errno;
    // Lost a race with another creator: fine as long as it is a directory now.
    if (err == EEXIST && isDirectory(p)) return;
    throwIoError("cannot create directory", p, err);
  }
  fsyncDirectory(parent);
}

void fsyncDirectory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throwIoError("cannot open directory", path, errno);
  if (::fsync(fd) != 0) {
    int err = errno;
    // Some file systems cannot fsync directories; their metadata is durable
    // by other means, so this is not an error there.
    if (err != EINVAL && err != ENOTSUP) {
      ::close(fd);
      throwIoError("cannot flush directory", path, err);
    }
  }
  if (::close(fd) != 0) throwIoError("cannot close directory", path, errno);
}

void renamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    throw IoError("cannot rename " + from + " to " + to + ": " + errnoText(err));
  }
}

void removeTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw IoError("cannot remove " + path + ": " + ec.message());
}

void replaceSymlink(const std::string& target, const std::string& link, const std::string& tmp_link) {
  if (::unlink(tmp_link.c_str()) != 0 && errno != ENOENT) throwIoError("cannot remove", tmp_link, errno);
  if (::symlink(target.c_str(), tmp_link.c_str()) != 0)
    throwIoError("cannot create symlink", tmp_link, errno);
  if (::rename(tmp_link.c_str(), link.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_link.c_str());  // best effort; the original error is the one to report
    throw IoError("cannot rename " + tmp_link + " to " + link + ": " + errnoText(err));
  }
}

std::string stripTrailingSlashes(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string parentPath(const std::string& path) {
  std::string p = stripTrailingSlashes(path);
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string baseName(const std::string& path) {
  std::string p = stripTrailingSlashes(path);
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace dtrain
