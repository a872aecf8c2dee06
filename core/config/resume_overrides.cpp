#include "core/config/resume_overrides.h"

#include <algorithm>
#include <sstream>
#include <type_traits>
#include <variant>

#include "core/config/cluster_token.h"
#include "core/config/fail_at.h"
#include "core/config/job_overrides.h"
#include "core/config/job_schema.h"
#include "core/config/job_to_toml.h"
#include "core/config/value_text.h"

namespace dtrain {

const char* const kResumeChangeable =
    "[strategy], [cluster], job.threads, job.device, job.precision, job.cpu_bf16, job.deterministic, "
    "job.gpu_workspace_mb, job.cuda_graphs, "
    "train.steps, train.epochs, train.loss_scale_* and the eval, checkpoint and log cadence";

namespace {

// The [train] keys that say how long the run goes on and how often it reports
// or saves; none of them changes what a step computes.
const std::vector<std::string>& changeableTrainKeys() {
  static const std::vector<std::string> keys = {"epochs",
                                                "steps",
                                                "eval_batch_size",
                                                "eval_every_steps",
                                                "eval_every_epoch",
                                                "checkpoint_every_steps",
                                                "checkpoint_every_epoch",
                                                "keep_last",
                                                "log_every_seconds",
                                                "loss_scale_initial",
                                                "loss_scale_growth_interval",
                                                "loss_scale_backoff",
                                                "loss_scale_growth"};
  return keys;
}

// A key of positions ("strategy", "cluster.hosts[1].slots", "job.threads")
// that belongs to a changeable key.
bool changeablePosition(const std::string& dotted) {
  size_t dot = dotted.find('.');
  std::string section = dotted.substr(0, dot);
  if (dot == std::string::npos) return section == "strategy" || section == "cluster";
  std::string key = dotted.substr(dot + 1);
  key = key.substr(0, key.find_first_of(".["));
  return changeableOnResume(section, key);
}

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// section and key of "section.key=value"; false when it is not of that shape
// (applyOverride then explains what is wrong with it).
bool splitOverride(const std::string& text, std::string* section, std::string* key) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) return false;
  std::string dotted = trim(text.substr(0, eq));
  size_t dot = dotted.find('.');
  if (dot == std::string::npos) return false;
  *section = dotted.substr(0, dot);
  *key = dotted.substr(dot + 1);
  return true;
}

bool isKnownKey(const std::string& section, const std::string& key) {
  std::vector<std::string> keys = sectionKeys(section);
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

void clearCluster(JobConfig& job) {
  job.cluster = ClusterSection{};
  for (auto it = job.positions.begin(); it != job.positions.end();) {
    bool cluster = it->first == "cluster" || it->first.rfind("cluster.", 0) == 0;
    it = cluster ? job.positions.erase(it) : std::next(it);
  }
}

// A value as a job file would show it: 0.003, "adamw", [64, 32].
std::string shown(const toml::node_view<const toml::node>& value) {
  if (!value) return "(not set)";
  if (const auto* text = value.as_string()) return quoteString(text->get());
  if (const auto* number = value.as_floating_point()) return formatFloat(number->get());
  if (const auto* array = value.as_array()) {
    std::vector<int64_t> ints;
    for (const toml::node& item : *array)
      if (const auto* i = item.as_integer()) ints.push_back(i->get());
    if (ints.size() == array->size()) return formatIntArray(ints);
  }
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string fixedKeyMessage(const std::string& section, const std::string& key) {
  return "[" + section + "] " + key +
         " cannot change on resume: the checkpoint was trained with it; start a new run with `dtrain "
         "train` to change it (resume may change " +
         kResumeChangeable + ")";
}

std::string differenceMessage(const std::string& section, const std::string& key,
                              const toml::node_view<const toml::node>& saved,
                              const toml::node_view<const toml::node>& file) {
  std::string what = section == "model" && key == "layers"
                         ? "[[model.layers]] differ from the layers the checkpoint was trained with"
                         : "[" + section + "] " + key + " is " + shown(file) +
                               " here, but the checkpoint was trained with " + shown(saved);
  return what + "; resume takes only " + kResumeChangeable +
         " from --job FILE: make the rest match, or start a new run with `dtrain train`";
}

}  // namespace

bool changeableOnResume(const std::string& section, const std::string& key) {
  if (section == "strategy" || section == "cluster") return true;
  if (section == "job")  // where and how the steps run, on which device and with which GPU algorithms
    return key == "threads" || key == "device" || key == "precision" || key == "memory_limit_mb" || key == "cpu_bf16" || key == "deterministic" ||
           key == "gpu_workspace_mb" || key == "cuda_graphs";
  if (section == "data")  // how, not what, is loaded
    return key == "loader_threads" || key == "prefetch" || key == "device_cache_mb";
  if (section == "train") {
    const std::vector<std::string>& keys = changeableTrainKeys();
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }
  return false;
}

void applyResumeOverrides(JobConfig& job, const std::vector<std::string>& overrides) {
  bool sets_token = false, sets_cluster = false, sets_strategy_type = false;
  for (const std::string& text : overrides) {
    std::string section, key;
    if (!splitOverride(text, &section, &key)) continue;
    if (!isSection(section) || !isKnownKey(section, key)) continue;  // applyOverride names it
    // The text may hold a secret only for cluster keys, and those may change.
    if (!changeableOnResume(section, key)) failAt(SourcePos{"--set " + text}, fixedKeyMessage(section, key));
    sets_cluster = sets_cluster || section == "cluster";
    sets_token = sets_token || (section == "cluster" && (key == "token" || key == "token_file"));
    sets_strategy_type = sets_strategy_type || (section == "strategy" && key == "type");
  }
  if (sets_token) {
    job.cluster.token.clear();
    job.cluster.token_file.clear();
    job.positions.erase("cluster.token");
    job.positions.erase("cluster.token_file");
  }
  for (const std::string& text : overrides) applyOverride(job, text);
  // The old [cluster] cannot serve a one-process run, nor a one-host run when it lists several hosts.
  const std::string& type = job.strategy.type;
  bool cluster_unusable = type == "one_device" ||
                          ((type == "mirrored" || type == "central_storage") && job.cluster.hosts.size() > 1);
  if (sets_strategy_type && !sets_cluster && job.cluster.present && cluster_unusable) clearCluster(job);
}

JobConfig withChangesFrom(const JobConfig& saved, const JobConfig& file_job) {
  const toml::table before = jobToTable(saved), after = jobToTable(file_job);
  for (const std::string& section : jobSections()) {
    for (const std::string& key : sectionKeys(section)) {
      if (changeableOnResume(section, key) || (section == "job" && key == "run_dir")) continue;
      const toml::node_view<const toml::node> was = before[section][key], is = after[section][key];
      if (was == is) continue;
      failAt(file_job.posOf(section + "." + key), differenceMessage(section, key, was, is));
    }
  }
  JobConfig job = saved;
  for (const JobField& f : jobFields()) {
    if (!changeableOnResume(f.section, f.key)) continue;
    std::visit(
        [](auto* to, auto* from) {
          using To = std::remove_pointer_t<decltype(to)>;
          using From = std::remove_const_t<std::remove_pointer_t<decltype(from)>>;
          if constexpr (std::is_same_v<To, From>) *to = *from;
        },
        f.ref(job), f.cref(file_job));
  }
  job.cluster = file_job.cluster;  // with its hosts, and whether it is there at all
  // Messages about the changed keys point into the file they came from.
  for (auto it = job.positions.begin(); it != job.positions.end();)
    it = changeablePosition(it->first) ? job.positions.erase(it) : std::next(it);
  for (const auto& [dotted, pos] : file_job.positions)
    if (changeablePosition(dotted)) job.positions[dotted] = pos;
  return job;
}

bool needsTokenAgain(const JobConfig& job) {
  return job.cluster.present && job.strategy.type != "one_device" && job.cluster.token == kHiddenToken;
}

std::string tokenAgainMessage(const std::string& run_dir) {
  return "[cluster] token was given inline, and checkpoints do not store it (state.toml shows \"" +
         std::string(kHiddenToken) + "\"); give it again: `dtrain resume " + run_dir +
         " --job FILE` with the job file that holds it, --set cluster.token=..., or --set "
         "cluster.token_file=PATH";
}

}  // namespace dtrain
