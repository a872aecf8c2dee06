// Throwing a ConfigError that starts with where the problem is, the one
// message shape every config error shares: "job.toml:12:5: [optimizer] ...".
#pragma once
#include <string>

#include "core/config/source_pos.h"

namespace dtrain {

// "job.toml:12:5: ", or "" when the position is empty (a config built in code).
std::string posPrefix(const SourcePos& pos);

[[noreturn]] void failAt(const SourcePos& pos, const std::string& msg);

}  // namespace dtrain
