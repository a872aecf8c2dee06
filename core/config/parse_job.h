// Reading a job file into a JobConfig: sections, keys and types are checked
// here, values are checked by validate_job.h. --set overrides ("dotted.key=value")
// are applied after the file, with the same checks.
#pragma once
#include <toml++/toml.h>

#include <string>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

// Throws ConfigError when the file cannot be read, is not valid TOML, or holds
// an unknown section or key or a value of the wrong type; so does a bad override.
JobConfig parseJobFile(const std::string& path, const std::vector<std::string>& overrides = {});

// `origin` names the text in messages and gives the default job name (its stem).
JobConfig parseJobString(const std::string& text, const std::string& origin,
                         const std::vector<std::string>& overrides = {});

// For a table already parsed, such as a checkpoint's resolved job (the caller
// removes any table that is not a job section first).
JobConfig parseJobTable(const toml::table& table, const std::string& origin,
                        const std::vector<std::string>& overrides = {});

}  // namespace dtrain
