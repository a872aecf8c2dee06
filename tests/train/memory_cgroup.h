// A memory cgroup of its own for a test's processes (root only): cgroup v1's
// memory controller (memory.limit_in_bytes) or v2's (memory.max). Runs that
// cannot make one (no root, no memory controller) skip what needs it.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace dtrain::testing {

class MemoryCgroup {
 public:
  explicit MemoryCgroup(int64_t limit_bytes) {
    const std::string name = "dtrain-test-" + std::to_string(::getpid());
    std::error_code ec;
    for (const auto& [root, limit_file] :
         {std::pair<std::string, std::string>{"/sys/fs/cgroup/memory", "memory.limit_in_bytes"},
          {"/sys/fs/cgroup", "memory.max"}}) {
      if (!std::filesystem::exists(root + "/cgroup.procs", ec)) continue;
      const std::string dir = root + "/" + name;
      if (!std::filesystem::create_directory(dir, ec) && !std::filesystem::is_directory(dir, ec)) continue;
      std::ofstream(dir + "/" + limit_file) << limit_bytes;
      std::ifstream in(dir + "/" + limit_file);
      int64_t got = 0;
      if (in >> got && got > 0 && got <= limit_bytes) {
        dir_ = dir;
        return;
      }
      std::filesystem::remove(dir, ec);
    }
  }
  ~MemoryCgroup() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove(dir_, ec);  // empty once its processes have exited
  }
  bool made() const { return !dir_.empty(); }
  // For runDtrain's `env`: the command runs inside the cgroup.
  std::string prefix() const { return "sh -c 'echo $$ > " + dir_ + "/cgroup.procs && exec \"$0\" \"$@\"'"; }

 private:
  std::string dir_;
};

}  // namespace dtrain::testing
