#include "core/config/tf_config_plan.h"

#include <cctype>
#include <cstdio>

#include "core/config/fail_at.h"
#include "core/config/tf_config_roles.h"
#include "core/io/crc32.h"

namespace dtrain {
namespace {

// The same text in every task of one job (the task is left out), for its launch id.
std::string clusterText(const TfConfig& tf) {
  std::string text;
  for (TfTaskType type : kTfTaskTypes) {
    text += tfTaskTypeName(type);
    for (const HostPort& a : tf.tasks(type)) text += " " + joinHostPort(a.host, a.port);
    text += ";";
  }
  return text;
}

std::string launchIdOf(const TfConfig& tf) {
  const std::string text = clusterText(tf);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32Update(0, text.data(), text.size()));
  return std::string("tf-") + hex;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The index of `host` in `hosts` (names compare as DNS does, ignoring case),
// appending it with no slots yet when new.
size_t hostIndex(std::vector<ClusterHost>& hosts, const std::string& host) {
  for (size_t i = 0; i < hosts.size(); ++i)
    if (lower(hosts[i].address) == lower(host)) return i;
  hosts.push_back(ClusterHost{host, 0, {}});
  return hosts.size() - 1;
}

}  // namespace

TfClusterPlan tfClusterPlan(const TfConfig& tf, const JobConfig& job) {
  TfClusterPlan plan;
  plan.strategy_type = tf.ps.empty() ? "multi_worker_mirrored" : "parameter_server";
  plan.ps_shards = tf.ps;
  plan.evaluator = tf.evaluator;
  plan.cluster = job.cluster;
  plan.cluster.present = true;
  plan.cluster.hosts.clear();

  const std::vector<TfTaskRole> roles = tfTaskRoles(tf);
  const int trainers = tfTrainerCount(tf);
  std::optional<LaunchEnv> self;
  // The trainers in rank order, then a parameter-server job's ps tasks as its
  // last ranks, the shards (as a dtrain parameter-server run has them).
  auto place = [&](const TfTaskRole& role, int rank) {
    if (role.coordinator()) plan.cluster.coordinator = joinHostPort(role.address.host, role.address.port);
    const size_t node = hostIndex(plan.cluster.hosts, role.address.host);
    ClusterHost& host = plan.cluster.hosts[node];
    if (role.self) {
      self = LaunchEnv{};
      self->rank = rank;
      self->node = static_cast<int>(node);
      self->local_rank = host.slots;  // the ranks counted on its host so far
    }
    ++host.slots;
  };
  for (const TfTaskRole& role : roles)
    if (role.rank >= 0) place(role, role.rank);  // roles list trainers in rank order
  for (const TfTaskRole& role : roles)
    if (role.shard >= 0) place(role, trainers + role.shard);
  if (self) {
    self->source = "TF_CONFIG";
    self->world_size = trainers + static_cast<int>(tf.ps.size());
    self->local_world_size = plan.cluster.hosts[self->node].slots;
    self->coordinator = plan.cluster.coordinator;
    self->launch_id = launchIdOf(tf);
  }
  plan.self = self;
  return plan;
}

std::optional<TfConfig> jobTfConfig(const JobConfig& job,
                                    const std::function<const char*(const char*)>& getenv_fn) {
  const std::string& from = job.cluster.from;
  if (from == "job") return std::nullopt;
  std::optional<std::string> text = tfConfigText(getenv_fn);
  if (!text) {
    if (from == "tf_config")
      failAt(job.posOf("cluster.from"),
             "[cluster] from = \"tf_config\" needs TF_CONFIG in the environment, which is not set; set it, "
             "or remove from and give coordinator and hosts");
    return std::nullopt;
  }
  return parseTfConfig(*text);
}

}  // namespace dtrain
