// Names inside a run's checkpoints/ directory and how to list them. Internal
// to core/train/checkpoint*. Pure name handling plus blocking directory
// listing; thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

inline constexpr const char* kCheckpointsDirName = "checkpoints";
inline constexpr const char* kModelFileName = "model.safetensors";
inline constexpr const char* kOptimizerFileName = "optimizer.safetensors";
inline constexpr const char* kStateFileName = "state.toml";
inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kLatestLinkName = "latest";
// Every unfinished or being-deleted entry starts with this; readers skip them.
inline constexpr const char* kTempPrefix = ".tmp-";

// "step-00000400" (at least 8 digits).
std::string stepDirName(int64_t step);
// The step of a canonical "step-XXXXXXXX" name, or -1 for any other name.
int64_t parseStepDirName(const std::string& name);

struct CheckpointDirEntry {
  int64_t step;
  std::string path;
};
// Complete-looking checkpoints in `checkpoints_dir`, oldest first. Empty when
// the directory does not exist. Throws IoError.
std::vector<CheckpointDirEntry> listCheckpointDirs(const std::string& checkpoints_dir);
// Names of every entry in `dir` (not "." or ".."). Throws IoError.
std::vector<std::string> listDirectory(const std::string& dir);

}  // namespace dtrain
