// A process's scheduling state as Linux reports it in /proc/<pid>/stat:
// 'R' running, 'S' sleeping, 'T' stopped (SIGSTOP), 'Z' zombie, and so on.
#pragma once
#include <cstdint>

namespace dtrain {

// The state letter of process `pid`, or '\0' when it cannot be read (no such
// process, or no /proc).
char processState(int64_t pid);

}  // namespace dtrain
