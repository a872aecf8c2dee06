// readCheckpoint and loadLatestCheckpoint: verify against the manifest, then
// parse; fall back to older checkpoints only when the caller did not name one.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "core/errors.h"
#include "core/io/file_source.h"
#include "core/io/fs_ops.h"
#include "core/train/checkpoint.h"
#include "core/train/checkpoint_layout.h"
#include "core/train/checkpoint_manifest.h"

namespace dtrain {

namespace {

// The outcome of reading one checkpoint directory: the checkpoint, or a short
// description of what is wrong with it.
struct Attempt {
  bool ok = false;
  bool incomplete = false;  // no manifest: the write never finished
  std::string problem;
  LoadedCheckpoint ckpt;
};

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// stat() a file listed in the manifest: false when it is missing, IoError for
// any other failure (that is not corruption, e.g. permission denied).
bool statFile(const std::string& path, struct stat* st) {
  if (::stat(path.c_str(), st) == 0) return true;
  if (errno == ENOENT) return false;
  throwIoError("cannot inspect", path, errno);
}

std::string verifyFiles(const std::string& dir, const CheckpointManifest& m) {
  // Sizes first: cheap, and they explain truncation better than a checksum.
  for (const ManifestEntry& e : m.files) {
    struct stat st;
    std::string path = dir + "/" + e.file;
    if (!statFile(path, &st)) return e.file + " is missing";
    if (!S_ISREG(st.st_mode)) return e.file + " is not a regular file";
    if (static_cast<uint64_t>(st.st_size) != e.digest.bytes)
      return e.file + ": size " + std::to_string(st.st_size) + ", manifest says " +
             std::to_string(e.digest.bytes);
  }
  for (const ManifestEntry& e : m.files) {
    FileDigest d = digestFile(dir + "/" + e.file);
    if (d.bytes != e.digest.bytes)
      return e.file + ": size " + std::to_string(d.bytes) + ", manifest says " +
             std::to_string(e.digest.bytes);
    if (d.crc32 != e.digest.crc32)
      return e.file + ": CRC-32 " + hex32(d.crc32) + ", manifest says " + hex32(e.digest.crc32);
  }
  return "";
}

// Parses one safetensors file of a checkpoint; its problems are reported
// relative to the checkpoint directory ("model.safetensors: ...").
bool parseTensors(const std::string& dir, const char* file, SafetensorsFile* out, std::string* problem) {
  std::string path = dir + "/" + file;
  try {
    *out = readSafetensors(path);
    return true;
  } catch (const CheckpointError& e) {
    std::string msg = e.what();
    *problem = msg.compare(0, dir.size() + 1, dir + "/") == 0 ? msg.substr(dir.size() + 1) : msg;
    return false;
  }
}

Attempt tryRead(const std::string& dir) {
  Attempt a;
  std::string manifest_path = dir + "/" + kManifestFileName;
  struct stat st;
  if (!statFile(manifest_path, &st)) {
    a.incomplete = true;
    a.problem = std::string(kManifestFileName) + " is missing, so its write never finished";
    return a;
  }
  CheckpointManifest m;
  if (!decodeManifest(readWholeFile(manifest_path), &m, &a.problem)) return a;
  int64_t named_step = parseStepDirName(baseName(dir));
  if (named_step >= 0 && named_step != m.step) {
    a.problem = std::string(kManifestFileName) + " is for step " + std::to_string(m.step) +
                ", not the step in the directory name";
    return a;
  }
  a.problem = verifyFiles(dir, m);
  if (!a.problem.empty()) return a;

  LoadedCheckpoint& c = a.ckpt;
  c.dir = dir;
  c.step = m.step;
  if (!parseTensors(dir, kModelFileName, &c.weights, &a.problem)) return a;
  if (!parseTensors(dir, kOptimizerFileName, &c.optimizer, &a.problem)) return a;
  c.metadata = c.weights.metadata;
  c.state_toml = readWholeFile(dir + "/" + kStateFileName);
  a.ok = true;
  return a;
}

[[noreturn]] void throwUnusable(const std::string& dir, const Attempt& a) {
  if (a.incomplete)
    throw CheckpointError("checkpoint " + dir + " is incomplete (" + a.problem +
                          "); resume from an earlier checkpoint or the run directory");
  throw CheckpointError(
      "checkpoint " + dir + " is corrupt (" + a.problem +
      "); resume from an earlier checkpoint or the run directory, which picks the newest valid one");
}

LoadedCheckpoint loadNewestValid(const std::string& ckdir, const std::string& asked,
                                 std::vector<std::string>* warnings) {
  std::vector<CheckpointDirEntry> entries = listCheckpointDirs(ckdir);
  if (entries.empty())
    throw CheckpointError("no checkpoint at " + asked + ": " + ckdir +
                          " holds no complete checkpoint; start the run without resuming");
  std::vector<std::pair<std::string, std::string>> failed;  // name, problem
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    Attempt a = tryRead(it->path);
    if (!a.ok) {
      failed.emplace_back(stepDirName(it->step), a.problem);
      continue;
    }
    if (warnings)
      for (const auto& [name, problem] : failed)
        warnings->push_back("checkpoint " + name + " is corrupt (" + problem + "); using " +
                            stepDirName(it->step));
    return std::move(a.ckpt);
  }
  std::string tried;
  for (const auto& [name, problem] : failed)
    tried += (tried.empty() ? "" : "; ") + name + " (" + problem + ")";
  throw CheckpointError("no valid checkpoint in " + ckdir + "; tried " + tried +
                        ". The files were damaged after they were written (disk or copy error): restore them "
                        "from a backup, or move " +
                        ckdir + " away to train from scratch");
}

}  // namespace

LoadedCheckpoint readCheckpoint(const std::string& dir_in) {
  std::string dir = stripTrailingSlashes(dir_in);
  if (!isDirectory(dir)) throw CheckpointError("no checkpoint at " + dir_in);
  Attempt a = tryRead(dir);
  if (!a.ok) throwUnusable(dir, a);
  return std::move(a.ckpt);
}

LoadedCheckpoint loadLatestCheckpoint(const std::string& path_in, std::vector<std::string>* warnings) {
  std::string path = stripTrailingSlashes(path_in);
  struct stat st;
  if (path.empty() || ::lstat(path.c_str(), &st) != 0) {
    if (path.empty() || errno == ENOENT || errno == ENOTDIR)
      throw CheckpointError("no checkpoint at " + path_in + " (nothing exists there)");
    throwIoError("cannot inspect", path, errno);
  }
  // The `latest` link: search its directory rather than trusting its target.
  if (S_ISLNK(st.st_mode) && baseName(path) == kLatestLinkName)
    return loadNewestValid(parentPath(path), path_in, warnings);
  if (!isDirectory(path))
    throw CheckpointError("no checkpoint at " + path_in +
                          ": it is not a directory (pass a run directory or a "
                          "checkpoint directory)");
  // An explicit checkpoint directory is used as is or not at all.
  if (parseStepDirName(baseName(path)) >= 0 || pathExists(path + "/" + kManifestFileName))
    return readCheckpoint(path);
  std::string ckdir = path + "/" + kCheckpointsDirName;
  if (isDirectory(ckdir)) return loadNewestValid(ckdir, path_in, warnings);
  // The checkpoints/ directory itself.
  if (pathExists(path + "/" + kLatestLinkName) || !listCheckpointDirs(path).empty())
    return loadNewestValid(path, path_in, warnings);
  throw CheckpointError("no checkpoint at " + path_in + ": it holds neither a checkpoints/ directory nor a " +
                        kManifestFileName + " (pass a run directory or a checkpoint directory)");
}

}  // namespace dtrain
