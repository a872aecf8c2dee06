#include "core/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>
#include <system_error>

#include "core/errors.h"

namespace dtrain {

namespace {

std::string errnoText(int error) { return std::error_code(error, std::generic_category()).message(); }

std::string byteSizeText(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

uint64_t randomBits() {
  try {
    std::random_device device;
    return (uint64_t(device()) << 32) ^ device();
  } catch (const std::exception&) {
    // No entropy source: the clock still makes the name unlikely to repeat,
    // and O_EXCL catches the rest.
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
           0x9e3779b97f4a7c15ULL;
  }
}

// "/dtrain-<pid>-<16 hex digits>": unique per run and group; the pid says
// whose a leftover is.
std::string uniqueName() {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(randomBits()));
  return "/dtrain-" + std::to_string(::getpid()) + "-" + hex;
}

// Checks the room in /dev/shm first, for a message that says what to change,
// then reserves every page: tmpfs otherwise hands out pages on first touch
// and a full one kills the process with SIGBUS instead of an error.
void reserve(int fd, const std::string& name, int64_t bytes) {
  struct statvfs fs {};
  if (::fstatvfs(fd, &fs) == 0) {
    const auto available = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
    if (bytes > available)
      throw CommError("the shared-memory segment " + name + " needs " + byteSizeText(bytes) +
                      " but /dev/shm has only " + byteSizeText(available) +
                      " free (give it more room, e.g. docker run --shm-size, or lower slot_bytes)");
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    throw CommError("cannot size the shared-memory segment " + name + " to " + byteSizeText(bytes) + ": " +
                    errnoText(errno));
  int error;
  do error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  while (error == EINTR);
  if (error != 0)
    throw CommError("cannot reserve " + byteSizeText(bytes) + " for the shared-memory segment " + name +
                    ": " + errnoText(error) + " (is /dev/shm full?)");
}

uint8_t* mapWhole(int fd, const std::string& name, int64_t bytes) {
  // MAP_POPULATE: the page tables are filled now, not by faults in the first calls.
  void* data =
      ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED)
    throw CommError("cannot map the shared-memory segment " + name + " (" + byteSizeText(bytes) +
                    "): " + errnoText(errno));
  return static_cast<uint8_t*>(data);
}

}  // namespace

std::unique_ptr<ShmSegment> ShmSegment::create(int64_t bytes) {
  for (int attempt = 0;; ++attempt) {
    std::string name = uniqueName();
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      const int error = errno;
      if (error == EEXIST && attempt < 8) continue;
      throw CommError("cannot create the shared-memory segment " + name + ": " + errnoText(error) +
                      (error == ENOENT || error == EACCES ? " (is /dev/shm mounted and writable?)" : ""));
    }
    std::unique_ptr<ShmSegment> segment(new ShmSegment(name, nullptr, 0));
    try {
      reserve(fd, name, bytes);
      segment->data_ = mapWhole(fd, name, bytes);
      segment->bytes_ = bytes;
    } catch (...) {
      ::close(fd);
      segment->unlinkName();
      throw;
    }
    ::close(fd);  // the mapping keeps the object
    return segment;
  }
}

std::unique_ptr<ShmSegment> ShmSegment::open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT)
      throw CommError(
          "the shared-memory segment " + name +
          " is gone (the other ranks gave up waiting, or an earlier group left its name in the store)");
    throw CommError("cannot open the shared-memory segment " + name + ": " + errnoText(error));
  }
  std::unique_ptr<ShmSegment> segment(new ShmSegment(name, nullptr, 0));
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      throw CommError("cannot read the size of the shared-memory segment " + name + ": " + errnoText(errno));
    if (st.st_size <= 0) throw CommError("the shared-memory segment " + name + " is empty");
    segment->data_ = mapWhole(fd, name, st.st_size);
    segment->bytes_ = st.st_size;
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return segment;
}

ShmSegment::~ShmSegment() {
  if (data_) ::munmap(data_, static_cast<size_t>(bytes_));
}

void ShmSegment::unlinkName() {
  if (unlinked_) return;
  unlinked_ = true;
  ::shm_unlink(name_.c_str());  // ENOENT: another rank was first
}

}  // namespace dtrain
