// --set overrides: "section.key=value" applied on top of a parsed job, checked
// like the job file itself. The value is TOML (3, 0.02, true, [256, 128],
// "adam"); a bare word that is not TOML is taken as a string, so
// `--set optimizer.type=adam` works without shell-quoted quotes.
#pragma once
#include <string>

#include "core/config/job_config.h"

namespace dtrain {

// Throws ConfigError, prefixed with the override itself, for a malformed
// override, an unknown section or key, or a value of the wrong type. The
// field's position becomes SourcePos{"--set <override>"}.
void applyOverride(JobConfig& job, const std::string& override_text);

}  // namespace dtrain
