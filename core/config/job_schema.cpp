#include "core/config/job_schema.h"

#include <algorithm>

#include "core/config/suggest.h"

namespace dtrain {

// Each entry names the member twice (text and member access); the macro keeps them in step.
#define DTRAIN_JOB_FIELD(sec, name)                                                                          \
  JobField {                                                                                                 \
#sec, #name,                                                                                             \
        [](JobConfig & j) -> FieldRef { return &j.sec.name; }, [](const JobConfig& j)                        \
                                                                    -> ConstFieldRef { return &j.sec.name; } \
  }

const std::vector<JobField>& jobFields() {
  static const std::vector<JobField> fields = {
      DTRAIN_JOB_FIELD(job, name),
      DTRAIN_JOB_FIELD(job, run_dir),
      DTRAIN_JOB_FIELD(job, seed),
      DTRAIN_JOB_FIELD(job, threads),
      DTRAIN_JOB_FIELD(job, device),
      DTRAIN_JOB_FIELD(job, precision),
      DTRAIN_JOB_FIELD(job, memory_limit_mb),
      DTRAIN_JOB_FIELD(job, cpu_bf16),
      DTRAIN_JOB_FIELD(job, deterministic),
      DTRAIN_JOB_FIELD(job, gpu_workspace_mb),
      DTRAIN_JOB_FIELD(job, cuda_graphs),

      DTRAIN_JOB_FIELD(model, preset),
      DTRAIN_JOB_FIELD(model, hidden),
      DTRAIN_JOB_FIELD(model, dropout),
      DTRAIN_JOB_FIELD(model, init),
      DTRAIN_JOB_FIELD(model, depth),
      DTRAIN_JOB_FIELD(model, width),
      DTRAIN_JOB_FIELD(model, heads),
      DTRAIN_JOB_FIELD(model, dim),
      DTRAIN_JOB_FIELD(model, context),
      DTRAIN_JOB_FIELD(model, vocab),
      DTRAIN_JOB_FIELD(model, tie_embeddings),

      DTRAIN_JOB_FIELD(data, dataset),
      DTRAIN_JOB_FIELD(data, dir),
      DTRAIN_JOB_FIELD(data, train_samples),
      DTRAIN_JOB_FIELD(data, test_samples),
      DTRAIN_JOB_FIELD(data, shape),
      DTRAIN_JOB_FIELD(data, classes),
      DTRAIN_JOB_FIELD(data, shuffle),
      DTRAIN_JOB_FIELD(data, prefetch),
      DTRAIN_JOB_FIELD(data, loader_threads),
      DTRAIN_JOB_FIELD(data, device_cache_mb),
      DTRAIN_JOB_FIELD(data, validation_dir),
      DTRAIN_JOB_FIELD(data, validation_fraction),
      DTRAIN_JOB_FIELD(data, split_seed),
      DTRAIN_JOB_FIELD(data, image_size),
      DTRAIN_JOB_FIELD(data, channels),
      DTRAIN_JOB_FIELD(data, bad_images),
      DTRAIN_JOB_FIELD(data, files),
      DTRAIN_JOB_FIELD(data, validation_files),
      DTRAIN_JOB_FIELD(data, context),
      DTRAIN_JOB_FIELD(data, vocab),
      DTRAIN_JOB_FIELD(data, pad_id),
      DTRAIN_JOB_FIELD(data, mean),
      DTRAIN_JOB_FIELD(data, std),
      DTRAIN_JOB_FIELD(data, augment_flip),
      DTRAIN_JOB_FIELD(data, augment_crop_padding),
      DTRAIN_JOB_FIELD(data, augment_resized_crop),
      DTRAIN_JOB_FIELD(data, augment_scale),
      DTRAIN_JOB_FIELD(data, augment_ratio),

      DTRAIN_JOB_FIELD(train, epochs),
      DTRAIN_JOB_FIELD(train, steps),
      DTRAIN_JOB_FIELD(train, batch_size),
      DTRAIN_JOB_FIELD(train, accumulate),
      DTRAIN_JOB_FIELD(train, eval_batch_size),
      DTRAIN_JOB_FIELD(train, eval_every_steps),
      DTRAIN_JOB_FIELD(train, eval_every_epoch),
      DTRAIN_JOB_FIELD(train, checkpoint_every_steps),
      DTRAIN_JOB_FIELD(train, checkpoint_every_epoch),
      DTRAIN_JOB_FIELD(train, keep_last),
      DTRAIN_JOB_FIELD(train, log_every_seconds),
      DTRAIN_JOB_FIELD(train, grad_clip_norm),
      DTRAIN_JOB_FIELD(train, label_smoothing),
      DTRAIN_JOB_FIELD(train, loss_scale_initial),
      DTRAIN_JOB_FIELD(train, loss_scale_growth_interval),
      DTRAIN_JOB_FIELD(train, loss_scale_backoff),
      DTRAIN_JOB_FIELD(train, loss_scale_growth),

      DTRAIN_JOB_FIELD(optimizer, type),
      DTRAIN_JOB_FIELD(optimizer, lr),
      DTRAIN_JOB_FIELD(optimizer, momentum),
      DTRAIN_JOB_FIELD(optimizer, nesterov),
      DTRAIN_JOB_FIELD(optimizer, weight_decay),
      DTRAIN_JOB_FIELD(optimizer, decay_1d),
      DTRAIN_JOB_FIELD(optimizer, decay_embeddings),
      DTRAIN_JOB_FIELD(optimizer, beta1),
      DTRAIN_JOB_FIELD(optimizer, beta2),
      DTRAIN_JOB_FIELD(optimizer, eps),

      DTRAIN_JOB_FIELD(schedule, type),
      DTRAIN_JOB_FIELD(schedule, warmup_steps),
      DTRAIN_JOB_FIELD(schedule, step_every),
      DTRAIN_JOB_FIELD(schedule, gamma),
      DTRAIN_JOB_FIELD(schedule, min_lr),

      DTRAIN_JOB_FIELD(strategy, type),
      DTRAIN_JOB_FIELD(strategy, workers),
      DTRAIN_JOB_FIELD(strategy, ps),
      DTRAIN_JOB_FIELD(strategy, consistency),
      DTRAIN_JOB_FIELD(strategy, staleness),
      DTRAIN_JOB_FIELD(strategy, scale_lr_by_staleness),
      DTRAIN_JOB_FIELD(strategy, min_workers),
      DTRAIN_JOB_FIELD(strategy, gradient_push),
      DTRAIN_JOB_FIELD(strategy, collective),
      DTRAIN_JOB_FIELD(strategy, bucket_mb),
      DTRAIN_JOB_FIELD(strategy, backend),
      DTRAIN_JOB_FIELD(strategy, sync_batchnorm),
      DTRAIN_JOB_FIELD(strategy, stage),
      DTRAIN_JOB_FIELD(strategy, stages),
      DTRAIN_JOB_FIELD(strategy, micro_batches),
      DTRAIN_JOB_FIELD(strategy, schedule),
      DTRAIN_JOB_FIELD(strategy, replicas),
      DTRAIN_JOB_FIELD(strategy, stage_memory_mb),
      DTRAIN_JOB_FIELD(strategy, split_by),
      DTRAIN_JOB_FIELD(strategy, rebalance_after_steps),

      DTRAIN_JOB_FIELD(cluster, from),
      DTRAIN_JOB_FIELD(cluster, coordinator),
      DTRAIN_JOB_FIELD(cluster, token),
      DTRAIN_JOB_FIELD(cluster, token_file),
      DTRAIN_JOB_FIELD(cluster, join_timeout_s),
      DTRAIN_JOB_FIELD(cluster, heartbeat_interval_s),
      DTRAIN_JOB_FIELD(cluster, heartbeat_timeout_s),
      DTRAIN_JOB_FIELD(cluster, collective_timeout_s),
      DTRAIN_JOB_FIELD(cluster, elastic),
      DTRAIN_JOB_FIELD(cluster, max_restarts),
      DTRAIN_JOB_FIELD(cluster, restart_window_s),
      DTRAIN_JOB_FIELD(cluster, host_cooldown_s),
  };
  return fields;
}

#undef DTRAIN_JOB_FIELD

const std::vector<std::string>& jobSections() {
  static const std::vector<std::string> sections = {"job",       "model",    "data",     "train",
                                                    "optimizer", "schedule", "strategy", "cluster"};
  return sections;
}

std::vector<std::string> sectionKeys(const std::string& section) {
  std::vector<std::string> keys;
  for (const JobField& f : jobFields())
    if (section == f.section) keys.push_back(f.key);
  if (section == "model") keys.push_back("layers");
  if (section == "cluster") keys.push_back("hosts");
  return keys;
}

const JobField* findField(const std::string& section, const std::string& key) {
  for (const JobField& f : jobFields())
    if (section == f.section && key == f.key) return &f;
  return nullptr;
}

bool isSection(const std::string& name) {
  const std::vector<std::string>& sections = jobSections();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

std::string unknownKeyMessage(const std::string& section, const std::string& key) {
  std::string msg = "[" + section + "] unknown key '" + key + "'";
  std::string hint = closestMatch(key, sectionKeys(section));
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  return msg;
}

std::string unknownSectionMessage(const std::string& section) {
  std::string msg = "unknown section [" + section + "]";
  std::string hint = closestMatch(section, jobSections());
  if (!hint.empty()) msg += " (did you mean [" + hint + "]?)";
  return msg;
}

}  // namespace dtrain
