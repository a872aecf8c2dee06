// Writing the complete resolved job (every field, defaults included) back out,
// for a run directory's record of what ran and for resuming from a checkpoint.
// parseJobString/parseJobTable read either form back to the same config,
// except an inline [cluster] token: it is written as "<hidden>" (cluster_token.h),
// because the text lands in checkpoints and in `dtrain check` output.
#pragma once
#include <toml++/toml.h>

#include <string>

#include "core/config/job_config.h"

namespace dtrain {

// TOML text with sections and keys in job_config.h order, layers as [[model.layers]],
// hosts as [[cluster.hosts]]. [cluster] only when the job has one; of token and
// token_file only the one given.
std::string jobToToml(const JobConfig& job);

// The same content as a table, for callers that add tables of their own
// (a checkpoint's [state]) before writing.
toml::table jobToTable(const JobConfig& job);

}  // namespace dtrain
