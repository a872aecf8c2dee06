// writeCheckpoint: write into a temporary directory, flush, publish by rename,
// re-point `latest`, prune. See checkpoint.h for the guarantees.
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "core/errors.h"
#include "core/io/file_sink.h"
#include "core/io/fs_ops.h"
#include "core/train/checkpoint.h"
#include "core/train/checkpoint_layout.h"
#include "core/train/checkpoint_manifest.h"
#include "core/train/checkpoint_publish.h"

namespace dtrain {

namespace {

// Writes every file of the checkpoint into `dir`, manifest last, and flushes
// the directory so the manifest is on disk only after everything it lists.
void writeFiles(const std::string& dir, int64_t step, const CheckpointContents& c) {
  CheckpointManifest m;
  m.step = step;
  FileDigest d;
  writeSafetensors(dir + "/" + kModelFileName, c.weights, c.metadata, &d);
  m.files.push_back({kModelFileName, d});
  writeSafetensors(dir + "/" + kOptimizerFileName, c.optimizer, {}, &d);
  m.files.push_back({kOptimizerFileName, d});
  m.files.push_back({kStateFileName, writeFileDurably(dir + "/" + kStateFileName, c.state_toml)});
  fsyncDirectory(dir);
  writeFileDurably(dir + "/" + kManifestFileName, encodeManifest(m));
  fsyncDirectory(dir);
}

// The pid in a ".tmp-<what>-<pid>" name, or -1.
long tempOwner(const std::string& name) {
  size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size()) return -1;
  long pid = 0;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 100'000'000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

// A temporary entry is stale unless another live process on this machine may
// still be writing it; our own leftovers (an earlier run that had the same
// pid, common in containers) are always stale.
bool isStaleTemp(const std::string& name) {
  long pid = tempOwner(name);
  if (pid <= 0 || pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

void prune(const std::string& ckdir, int64_t keep_last, int64_t written_step, const std::string& pid) {
  if (keep_last >= 1) {
    std::vector<CheckpointDirEntry> all = listCheckpointDirs(ckdir);
    std::vector<CheckpointDirEntry> others;
    for (const CheckpointDirEntry& e : all)
      if (e.step != written_step) others.push_back(e);
    // The one just written always stays and counts towards keep_last.
    size_t keep_others =
        static_cast<size_t>(std::min<int64_t>(keep_last - 1, static_cast<int64_t>(others.size())));
    size_t remove = others.size() - keep_others;
    for (size_t i = 0; i < remove; ++i) {
      // Rename first so a deletion cut short leaves a .tmp-* entry, not a
      // half-deleted checkpoint that a reader might try.
      std::string doomed = ckdir + "/" + kTempPrefix + "del-" + stepDirName(others[i].step) + "-" + pid;
      removeTree(doomed);
      renamePath(others[i].path, doomed);
      removeTree(doomed);
    }
  }
  for (const std::string& name : listDirectory(ckdir))
    if (name.compare(0, std::char_traits<char>::length(kTempPrefix), kTempPrefix) == 0 && isStaleTemp(name))
      removeTree(ckdir + "/" + name);
}

}  // namespace

std::string writeCheckpoint(const std::string& run_dir, int64_t step, const CheckpointContents& c,
                            int64_t keep_last) {
  if (step < 0)
    throw Error("cannot write a checkpoint for step " + std::to_string(step) + ": steps start at 0");
  const std::string ckdir = stripTrailingSlashes(run_dir) + "/" + kCheckpointsDirName;
  const std::string name = stepDirName(step);
  const std::string pid = std::to_string(static_cast<long>(::getpid()));
  const std::string tmp_dir = ckdir + "/" + kTempPrefix + name + "-" + pid;
  const std::string final_dir = ckdir + "/" + name;

  makeDirectories(ckdir);
  removeTree(tmp_dir);  // left by an earlier process that had our pid
  if (::mkdir(tmp_dir.c_str(), 0755) != 0) throwIoError("cannot create directory", tmp_dir, errno);
  try {
    writeFiles(tmp_dir, step, c);
    publishCheckpointDir(ckdir, tmp_dir, final_dir, ckdir + "/" + kTempPrefix + "old-" + name + "-" + pid);
  } catch (...) {
    try {
      removeTree(tmp_dir);
    } catch (const Error&) {
      // The write error is the one worth reporting; a later write cleans up.
    }
    throw;
  }
  fsyncDirectory(ckdir);

  replaceSymlink(name, ckdir + "/" + kLatestLinkName, ckdir + "/" + kTempPrefix + "latest-" + pid);
  fsyncDirectory(ckdir);

  prune(ckdir, keep_last, step, pid);
  fsyncDirectory(ckdir);
  return final_dir;
}

}  // namespace dtrain
