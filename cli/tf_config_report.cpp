#include "cli/tf_config_report.h"

#include <algorithm>

#include "core/config/tf_config_plan.h"
#include "core/config/tf_config_roles.h"

namespace dtrain::cli {
namespace {

std::string padded(std::string s, size_t width) {
  s.resize(std::max(s.size(), width), ' ');
  return s;
}

std::string taskName(const TfConfig& tf, const TfTaskRole& role) {
  return tf.keyOf(role.type) + " " + std::to_string(role.index);
}

std::string addressOf(const HostPort& a) { return joinHostPort(a.host, a.port); }

// "10.0.0.1:2,[fe80::1]:1": host:slots, as the short form of [cluster] hosts
// writes them (an IPv6 host in brackets).
std::string hostsText(const ClusterSection& cluster) {
  std::string text;
  for (const ClusterHost& h : cluster.hosts)
    text += (text.empty() ? "" : ",") + addressOf(HostPort{h.address, h.slots});
  return text;
}

std::string planLine(const TfClusterPlan& plan, const JobConfig& job) {
  std::string line = "# TF_CONFIG as a dtrain job: strategy " + plan.strategy_type;
  if (job.strategy.type != plan.strategy_type) line += " in place of the job's " + job.strategy.type;
  line += ", coordinator " + plan.cluster.coordinator + ", hosts \"" + hostsText(plan.cluster) + "\"";
  const size_t shards = plan.ps_shards.size();
  if (shards > 0) line += ", " + std::to_string(shards) + " parameter-server shard" + (shards > 1 ? "s" : "");
  if (!plan.evaluator.empty()) line += ", an evaluator";
  return line + "\n";
}

// "dtrain rank 2 of 3", "dtrain rank 0 of 3 (coordinator)", "parameter-server shard 1 of 2", "the evaluator".
std::string selfText(const TfConfig& tf, const TfTaskRole& self) {
  if (self.rank >= 0)
    return "dtrain rank " + std::to_string(self.rank) + " of " + std::to_string(tfTrainerCount(tf)) +
           (self.coordinator() ? " (coordinator)" : "");
  if (self.shard >= 0) return self.roleText() + " of " + std::to_string(tf.ps.size());
  return "the evaluator";
}

}  // namespace

std::string tfConfigReport(const TfConfig& tf, const JobConfig& job) {
  const std::vector<TfTaskRole> roles = tfTaskRoles(tf);
  const TfTaskRole& self = tfSelfRole(roles);
  std::string out = "# TF_CONFIG: this process is " + taskName(tf, self) + ", " + selfText(tf, self) + "\n";
  size_t name_width = 0, address_width = 0, role_width = 0;
  for (const TfTaskRole& role : roles) {
    name_width = std::max(name_width, taskName(tf, role).size());
    address_width = std::max(address_width, addressOf(role.address).size());
    role_width = std::max(role_width, role.roleText().size());
  }
  for (const TfTaskRole& role : roles) {
    std::string line = "#   " + padded(taskName(tf, role), name_width) + "  " +
                       padded(addressOf(role.address), address_width) + "  " + role.roleText();
    if (role.self)
      line = padded(line, 4 + name_width + 2 + address_width + 2 + role_width) + "  <- this process";
    out += line + "\n";
  }
  out += planLine(tfClusterPlan(tf, job), job);
  return out;
}

}  // namespace dtrain::cli
