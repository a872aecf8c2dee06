// manifest.json of a checkpoint: format name and version, the step, and the
// size and CRC-32 of every other file. Written last, so its presence marks a
// checkpoint whose files were all written and flushed. Internal to
// core/train/checkpoint*; pure functions, thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/file_sink.h"

namespace dtrain {

inline constexpr const char* kCheckpointFormatName = "dtrain-checkpoint";
// Bump when the layout changes in a way older readers cannot handle.
inline constexpr int64_t kCheckpointFormatVersion = 1;

struct ManifestEntry {
  std::string file;  // name inside the checkpoint directory
  FileDigest digest;
};

struct CheckpointManifest {
  int64_t version = kCheckpointFormatVersion;
  int64_t step = 0;
  std::vector<ManifestEntry> files;
};

std::string encodeManifest(const CheckpointManifest& m);
// Parses manifest text. Returns false and sets *problem (a short phrase such
// as "manifest.json is not valid JSON (...)") when it is unusable.
bool decodeManifest(const std::string& text, CheckpointManifest* m, std::string* problem);

}  // namespace dtrain
