// Thin, error-checked wrappers over the POSIX file-system calls that durable
// writes need (rename, fsync of a directory, recursive removal). Every failure
// throws IoError naming the path and the system's reason. Blocking; thread-safe
// as far as the underlying calls are.
#pragma once
#include <string>

namespace dtrain {

// strerror() text for an errno value ("No space left on device").
std::string errnoText(int err);

// IoError("<what> <path>: <errno text>").
[[noreturn]] void throwIoError(const std::string& what, const std::string& path, int err);

// True when `path` names anything (a dangling symlink counts). Throws on
// errors other than "does not exist".
bool pathExists(const std::string& path);
// True when `path` is a directory (following symlinks); false when absent.
bool isDirectory(const std::string& path);

// mkdir -p; fsyncs the parent of every directory it creates so the new
// entries survive a power loss.
void makeDirectories(const std::string& path);

// Flushes a directory's entries (new, renamed or removed names) to disk.
void fsyncDirectory(const std::string& path);

// rename(2): atomically replaces `to` (a file, a symlink or an empty directory).
void renamePath(const std::string& from, const std::string& to);

// Removes a file, symlink or directory tree; no error when it is already gone.
void removeTree(const std::string& path);

// Creates or atomically replaces the symlink `link` -> `target` via a temporary
// link `tmp_link` and rename, so `link` is never missing or half-written.
void replaceSymlink(const std::string& target, const std::string& link, const std::string& tmp_link);

// The parent directory of `path` ("." when it has none); trailing slashes ignored.
std::string parentPath(const std::string& path);
// The last component of `path`; trailing slashes ignored.
std::string baseName(const std::string& path);
// `path` without trailing slashes ("/" stays "/").
std::string stripTrailingSlashes(const std::string& path);

}  // namespace dtrain
