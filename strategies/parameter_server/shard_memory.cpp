#include "strategies/parameter_server/shard_memory.h"

#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/errors.h"

namespace dtrain {

namespace {

constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string systemError() { return std::strerror(errno); }

float* mapShared(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<float*>(p);
}

}  // namespace

size_t ShardMemory::bytesFor(int64_t floats) { return static_cast<size_t>(floats) * 2 * sizeof(float); }

std::unique_ptr<ShardMemory> ShardMemory::create(int64_t floats) {
  if (floats < 1) throw Error("shard memory of " + std::to_string(floats) + " floats");
  const int fd = ::memfd_create("dtrain-ps-shard", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw Error("memfd_create: " + systemError());
  const size_t bytes = bytesFor(floats);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    const std::string why = systemError();
    ::close(fd);
    throw Error("shard memory of " + std::to_string(bytes) + " bytes: " + why);
  }
  float* base = mapShared(fd, bytes);
  if (!base) {
    const std::string why = systemError();
    ::close(fd);
    throw Error("mapping shard memory of " + std::to_string(bytes) + " bytes: " + why);
  }
  return std::unique_ptr<ShardMemory>(new ShardMemory(fd, base, floats));
}

std::unique_ptr<ShardMemory> ShardMemory::open(int pid, int fd, int64_t floats) {
  // (A size past 2^40 floats is nothing a worker sends; it would wrap bytesFor.)
  if (pid < 1 || fd < 0 || floats < 1 || floats > (int64_t{1} << 40))
    throw Error("no such shared memory (process " + std::to_string(pid) + ", descriptor " +
                std::to_string(fd) + ", " + std::to_string(floats) + " floats)");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) throw Error("cannot open " + path + ": " + systemError());
  const size_t bytes = bytesFor(floats);
  struct stat st {};
  std::string wrong;
  if (::fstat(own, &st) != 0)
    wrong = "fstat: " + systemError();
  else if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != bytes)
    wrong =
        "it holds " + std::to_string(st.st_size) + " bytes, not the " + std::to_string(bytes) + " announced";
  else if (const int seals = ::fcntl(own, F_GET_SEALS);
           seals < 0 || (static_cast<unsigned>(seals) & kSeals) != kSeals)
    wrong = "it is not sealed at its size";
  float* base = wrong.empty() ? mapShared(own, bytes) : nullptr;
  if (wrong.empty() && !base) wrong = "mmap: " + systemError();
  if (!wrong.empty()) {
    ::close(own);
    throw Error(path + ": " + wrong);
  }
  return std::unique_ptr<ShardMemory>(new ShardMemory(own, base, floats));
}

void ShardMemory::streamInto(float* to, const float* from, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(to + i) & 31) != 0; ++i) to[i] = from[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(to + i, _mm256_loadu_ps(from + i));
  for (; i < n; ++i) to[i] = from[i];
  _mm_sfence();
}

ShardMemory::~ShardMemory() {
  ::munmap(base_, bytesFor(floats_));
  ::close(fd_);
}

}  // namespace dtrain
