// Moving a finished checkpoint directory to its final name. Internal to
// core/train/checkpoint*; blocking; one writer per checkpoints/ directory.
#pragma once
#include <string>

namespace dtrain {

// Renames `tmp_dir` to `final_dir`. When `final_dir` exists (the same step is
// written again) the two are swapped atomically with renameat2(RENAME_EXCHANGE)
// where the file system supports it; otherwise the old directory is first
// renamed to `aside`. Either way the old checkpoint is then deleted, and a
// kill at any moment leaves it or the new one under the final name or under a
// .tmp-* name that the next write removes. `allow_exchange` = false forces
// the rename-aside path (for tests). Throws IoError.
void publishCheckpointDir(const std::string& ckdir, const std::string& tmp_dir, const std::string& final_dir,
                          const std::string& aside, bool allow_exchange = true);

}  // namespace dtrain
