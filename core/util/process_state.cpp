#include "core/util/process_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace dtrain {

char processState(int64_t pid) {
  if (pid <= 0) return '\0';
  // "<pid> (<name>) <state> ...": the name may hold ')' itself, so the state
  // follows the last one.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return '\0';
  char text[512];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return '\0';
  text[got] = '\0';
  const char* end = std::strrchr(text, ')');
  if (!end || end[1] != ' ' || end[2] == '\0') return '\0';
  return end[2];
}

}  // namespace dtrain
