// --set overrides: "section.key=value" applied on top of a parsed job, checked
// like the job file itself. The value is TOML (3, 0.02, true, [256, 128],
// "adam"); a bare word that is not TOML is taken as a string, so
// `--set optimizer.type=adam` works without shell-quoted quotes.
// cluster.hosts takes the short form 10.0.0.1:2,10.0.0.2:2 (address[:slots],
// an IPv6 address in brackets) or TOML ([{ address = "10.0.0.1", slots = 2 }]),
// and replaces the file's hosts. Setting any cluster key gives the job a [cluster].
#pragma once
#include <string>

#include "core/config/job_config.h"

namespace dtrain {

// Throws ConfigError, prefixed with the override itself, for a malformed
// override, an unknown section or key, or a value of the wrong type. The
// field's position becomes SourcePos{"--set <override>"} (for cluster.token,
// "--set cluster.token=<hidden>", so no message shows the secret).
void applyOverride(JobConfig& job, const std::string& override_text);

}  // namespace dtrain
