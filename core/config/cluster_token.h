// The shared secret of a [cluster]: every worker presents it when it joins, so
// a stray process (or another job on the same port) cannot take a rank.
// It is given inline (token) or in a file (token_file, first line). The
// resolved job that `dtrain check` prints and checkpoints store writes an
// inline token as kHiddenToken; token_file is written as is (a path, not the secret).
#pragma once
#include <string>

#include "core/config/job_config.h"

namespace dtrain {

// What jobToToml writes in place of an inline token.
inline constexpr const char* kHiddenToken = "<hidden>";

// The token, trimmed of surrounding whitespace: `token`, or the first line of
// `token_file` (read on every call, so a rotated file is picked up). Throws
// ConfigError naming the file when it cannot be read or its first line is
// empty, when neither is given, and when the token is kHiddenToken (a job
// read back from a checkpoint: the secret has to be given again).
std::string readClusterToken(const ClusterSection& cluster);

}  // namespace dtrain
