#include "core/train/checkpoint_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/errors.h"
#include "core/io/fs_ops.h"
#include "core/train/checkpoint.h"

namespace dtrain {

std::string stepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

int64_t parseStepDirName(const std::string& name) {
  const std::string prefix = "step-";
  if (name.size() < prefix.size() + 8 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return -1;
    if (__builtin_mul_overflow(step, 10, &step) || __builtin_add_overflow(step, c - '0', &step)) return -1;
  }
  // Only the canonical spelling: "step-000000400" would alias step-00000400.
  return stepDirName(step) == name ? step : -1;
}

std::vector<std::string> listDirectory(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  if (ec) throw IoError("cannot list " + dir + ": " + ec.message());
  return names;
}

std::vector<CheckpointDirEntry> listCheckpointDirs(const std::string& checkpoints_dir) {
  std::vector<CheckpointDirEntry> out;
  if (!isDirectory(checkpoints_dir)) return out;
  for (const std::string& name : listDirectory(checkpoints_dir)) {
    int64_t step = parseStepDirName(name);
    if (step < 0) continue;
    std::string path = checkpoints_dir + "/" + name;
    struct stat st;
    std::string manifest = path + "/" + kManifestFileName;
    // A directory without its manifest is an interrupted write or deletion.
    if (isDirectory(path) && ::stat(manifest.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      out.push_back({step, path});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointDirEntry& a, const CheckpointDirEntry& b) { return a.step < b.step; });
  return out;
}

std::vector<std::string> listCheckpoints(const std::string& run_dir) {
  std::vector<std::string> paths;
  for (const CheckpointDirEntry& e :
       listCheckpointDirs(stripTrailingSlashes(run_dir) + "/" + kCheckpointsDirName))
    paths.push_back(e.path);
  return paths;
}

}  // namespace dtrain
