// Checking the values of a parsed job: ranges, choices, and the rules that tie
// fields together. Separate from parsing so a job built in code, or resumed
// from a checkpoint, is held to the same rules.
#pragma once
#include "core/config/job_config.h"

namespace dtrain {

// Throws ConfigError for the first problem, in job_config.h order:
// "job.toml:12:5: [optimizer] lr must be > 0 (got -0.1)". The position comes
// from JobConfig::posOf, so an override or a defaulted key is named as such.
// Layer-specific options are left to the layer factories.
// `under_launcher`: this process is one rank of a launch (torchrun, srun,
// mpirun; core/config/launch_env.h), which gives the ranks, the coordinator
// and a run token: [cluster] and its hosts, coordinator and token may then be
// left out.
void validateJob(const JobConfig& job, bool under_launcher = false);

}  // namespace dtrain
