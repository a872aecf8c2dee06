// What `dtrain resume` may change in the job a checkpoint was trained with.
// The weights, optimizer state and data position were produced by that job's
// model, data, optimizer, schedule, batch size and seed; continuing them under
// other values would be a different run. What may change is where and how the
// run executes, and how long it goes on:
//   [strategy] and [cluster] (any key), job.threads, job.device, job.precision,
//   job.cpu_bf16, job.deterministic, job.gpu_workspace_mb, job.cuda_graphs,
//   data.loader_threads, data.prefetch and data.device_cache_mb (how, not what, is loaded),
//   train.steps and train.epochs (a longer run; a cosine schedule then ends later),
//   the cadence of evaluation, checkpoints and progress lines
//   (train.eval_every_steps, eval_every_epoch, eval_batch_size,
//   checkpoint_every_steps, checkpoint_every_epoch, keep_last, log_every_seconds).
// The global batch and the sample order do not depend on the world size, so a
// run resumed with another number of workers continues with the same batches.
#pragma once
#include <string>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

// The list above in a few words, for messages and --help.
extern const char* const kResumeChangeable;

// True when section.key ("strategy.workers", "cluster.hosts") may change on resume.
bool changeableOnResume(const std::string& section, const std::string& key);

// Applies `dtrain resume --set` overrides (the syntax of `train --set`) to a
// resolved job. Throws ConfigError, prefixed with the override, for a key that
// may not change ("--set model.preset=mlp: [model] preset cannot change on
// resume: ..."), and whatever applyOverride throws for a malformed one. Two
// rules make a change of execution whole:
//  - setting cluster.token or cluster.token_file replaces both (the job's
//    token may be the "<hidden>" placeholder of a checkpoint);
//  - setting strategy.type to one that cannot take the job's [cluster]
//    (one_device; mirrored or central_storage with several hosts) drops that
//    [cluster], unless a cluster key is set too.
void applyResumeOverrides(JobConfig& job, const std::vector<std::string>& overrides);

// `saved` with every changeable key taken from `file_job` (its whole [strategy]
// and [cluster], present or not), and with saved's run_dir. Every other key
// must have the same value in both: otherwise throws ConfigError at the first
// that differs, positioned in `file_job` ("next.toml:14:1: [optimizer] lr is
// 0.01 here but the checkpoint was trained with 0.003; ...").
JobConfig withChangesFrom(const JobConfig& saved, const JobConfig& file_job);

// True when the job's multi-host token is the placeholder a checkpoint stores
// for an inline token, so the secret has to be given again.
bool needsTokenAgain(const JobConfig& job);
// The one-line message for that case, naming the three ways to give it.
std::string tokenAgainMessage(const std::string& run_dir);

}  // namespace dtrain
