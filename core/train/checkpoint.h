// Crash-safe training checkpoints.
//
// Layout of one run directory:
//   RUN_DIR/checkpoints/step-00000400/model.safetensors      weights ("conv1.weight")
//                                    /optimizer.safetensors  optimizer state ("momentum.conv1.weight"; may
//                                    hold none) /state.toml             trainer state, verbatim from the
//                                    caller /manifest.json          size + CRC-32 of each file above; written
//                                    last
//   RUN_DIR/checkpoints/latest -> step-00000400              the checkpoint written most recently
//   RUN_DIR/checkpoints/.tmp-*                               unfinished writes; ignored by readers
//
// A checkpoint only ever appears under its final name complete and flushed to
// disk, so a process killed at any moment leaves the earlier checkpoints intact
// and at worst a .tmp-* directory that the next write removes.
//
// All functions block on file I/O. They keep no global state; one process at a
// time may write checkpoints into a run directory (concurrent readers are fine).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/train/safetensors.h"

namespace dtrain {

struct CheckpointContents {
  std::vector<NamedTensorView> weights, optimizer;  // borrowed for the call
  std::map<std::string, std::string> metadata;      // stored in model.safetensors __metadata__
  std::string state_toml;
};

// Writes the checkpoint for `step` (>= 0) and returns its directory
// RUN_DIR/checkpoints/step-XXXXXXXX. Steps: write into
// .tmp-step-XXXXXXXX-<pid>, fsync every file and the directory, rename it to
// its final name (an existing checkpoint of the same step is swapped out
// atomically where the file system allows, else renamed aside first; then
// removed), fsync checkpoints/, re-point `latest` at it via a
// temporary symlink and rename, then delete the oldest complete checkpoints
// beyond the newest `keep_last` (never the one just written; keep_last < 1
// keeps all) and stale .tmp-* entries of processes no longer running.
// Throws Error for an invalid tensor list and IoError (naming the path and the
// system's reason) when the disk refuses; the temporary directory is removed
// and earlier checkpoints are untouched.
std::string writeCheckpoint(const std::string& run_dir, int64_t step, const CheckpointContents& c,
                            int64_t keep_last);

struct LoadedCheckpoint {
  std::string dir;
  int64_t step = 0;
  SafetensorsFile weights, optimizer;
  std::map<std::string, std::string> metadata;  // weights.metadata
  std::string state_toml;
};

// Reads the checkpoint directory `dir` after checking its manifest (present,
// parseable, known version) and each file's size and CRC-32 against it.
// Throws CheckpointError naming the directory, the file and what is wrong, and
// IoError when a file cannot be read at all (e.g. permission denied).
LoadedCheckpoint readCheckpoint(const std::string& dir);

// Resumes from `path`: a checkpoint directory, a `latest` link, a run
// directory or its checkpoints/ directory. For all but an explicit checkpoint
// directory it tries the complete checkpoints newest first (by step number,
// not by the link); each one that fails verification adds a line such as
// "checkpoint step-00000400 is corrupt (model.safetensors: size 1234, manifest
// says 5678); using step-00000300" to *warnings (when not null) and the next
// older one is tried. Throws CheckpointError when nothing exists at `path`,
// when no checkpoint there is valid (listing what was tried), or when an
// explicit checkpoint directory is corrupt (it is never silently replaced).
LoadedCheckpoint loadLatestCheckpoint(const std::string& path, std::vector<std::string>* warnings);

// The complete-looking checkpoints (step-XXXXXXXX directories holding a
// manifest.json) of `run_dir`, oldest first by step number; .tmp-* entries are
// ignored. Empty when there is no checkpoints/ directory. Throws IoError when
// the directory cannot be listed.
std::vector<std::string> listCheckpoints(const std::string& run_dir);

}  // namespace dtrain
