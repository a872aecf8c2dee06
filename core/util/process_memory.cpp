#include "core/util/process_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace dtrain {

int64_t releaseFloats(float* data, int64_t begin, int64_t end) {
  if (end <= begin) return 0;
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(data + begin);
  const auto last = reinterpret_cast<uintptr_t>(data + end);
  const uintptr_t whole_begin = (first + page - 1) / page * page;
  const uintptr_t whole_end = last / page * page;
  if (whole_end <= whole_begin) {
    std::memset(data + begin, 0, static_cast<size_t>(end - begin) * sizeof(float));
    return 0;
  }
  std::memset(reinterpret_cast<void*>(first), 0, whole_begin - first);
  std::memset(reinterpret_cast<void*>(whole_end), 0, last - whole_end);
  // Should the system refuse (it does not for private anonymous memory),
  // the range is zeroed all the same, only not handed back.
  if (madvise(reinterpret_cast<void*>(whole_begin), whole_end - whole_begin, MADV_DONTNEED) != 0) {
    std::memset(reinterpret_cast<void*>(whole_begin), 0, whole_end - whole_begin);
    return 0;
  }
  return static_cast<int64_t>(whole_end - whole_begin);
}

int64_t residentBytes(const float* data, int64_t n) {
  if (n <= 0) return 0;
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(data + n) + page - 1) / page * page;
  std::vector<unsigned char> in_core((last - first) / page);
  if (mincore(reinterpret_cast<void*>(first), last - first, in_core.data()) != 0) return n * 4;
  int64_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1;
  return pages * static_cast<int64_t>(page);
}

int64_t oomKillCount() {
  FILE* f = std::fopen("/proc/vmstat", "r");
  if (!f) return 0;
  char line[128];
  long long kills = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "oom_kill %lld", &kills) == 1) break;
  std::fclose(f);
  return kills;
}

ResidentMemory residentMemory() {
  ResidentMemory m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long long kb = 0;
    if (std::sscanf(line, "VmRSS: %lld kB", &kb) == 1) m.now_bytes = kb * 1024;
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1) m.peak_bytes = kb * 1024;
  }
  std::fclose(f);
  return m;
}

}  // namespace dtrain
