#include "core/train/checkpoint_publish.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>

#include "core/errors.h"
#include "core/io/fs_ops.h"

namespace dtrain {

namespace {

// True when the swap happened; false when this file system (or kernel) cannot
// exchange, so the caller must fall back. Other failures throw.
bool exchange(const std::string& a, const std::string& b) {
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  int err = errno;
  if (err == EINVAL || err == ENOSYS || err == ENOTSUP) return false;
  throw IoError("cannot exchange " + a + " and " + b + ": " + errnoText(err));
#else
  return false;
#endif
}

}  // namespace

void publishCheckpointDir(const std::string& ckdir, const std::string& tmp_dir, const std::string& final_dir,
                          const std::string& aside, bool allow_exchange) {
  if (!pathExists(final_dir)) {
    renamePath(tmp_dir, final_dir);
    return;
  }
  if (allow_exchange && exchange(tmp_dir, final_dir)) {
    // tmp_dir now holds the old checkpoint under a name readers ignore.
    fsyncDirectory(ckdir);
    removeTree(tmp_dir);
    return;
  }
  // rename() cannot replace a non-empty directory: set the old one aside.
  removeTree(aside);
  renamePath(final_dir, aside);
  try {
    renamePath(tmp_dir, final_dir);
  } catch (...) {
    (void)::rename(aside.c_str(), final_dir.c_str());  // best effort: put the old one back
    throw;
  }
  fsyncDirectory(ckdir);
  removeTree(aside);
}

}  // namespace dtrain
