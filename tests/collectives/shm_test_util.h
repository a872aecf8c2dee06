// Helpers of the shared-memory group's tests: options with small slots (so
// a few thousand elements already take several chunks) and a look into
// /dev/shm for segments this process left behind.
#pragma once
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "core/comm/shm_process_group.h"

namespace dtrain::testing {

// 4096-byte slots: 1024 floats or 512 doubles per chunk.
inline ShmOptions shmTestOptions(std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                 int64_t slotBytes = 4096) {
  ShmOptions options;
  options.timeout = timeout;
  options.prefix = "test";
  options.slot_bytes = slotBytes;
  return options;
}

// Names in /dev/shm of segments made by this process (their names carry its
// pid) that are still there; other processes' runs are not looked at.
inline std::vector<std::string> leftoverSegments() {
  const std::string mine = "dtrain-" + std::to_string(::getpid()) + "-";
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(mine, 0) == 0) found.push_back(name);
  }
  return found;
}

}  // namespace dtrain::testing
