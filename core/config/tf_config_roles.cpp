#include "core/config/tf_config_roles.h"

namespace dtrain {

std::string TfTaskRole::roleText() const {
  if (rank == 0) return "rank 0 (coordinator)";
  if (rank > 0) return "rank " + std::to_string(rank);
  if (shard >= 0) return "parameter-server shard " + std::to_string(shard);
  return "evaluator";
}

int tfTrainerCount(const TfConfig& tf) { return static_cast<int>(tf.chief.size() + tf.worker.size()); }

std::vector<TfTaskRole> tfTaskRoles(const TfConfig& tf) {
  std::vector<TfTaskRole> roles;
  const int chiefs = static_cast<int>(tf.chief.size());  // 0 or 1
  for (TfTaskType type : kTfTaskTypes) {
    const std::vector<HostPort>& tasks = tf.tasks(type);
    for (size_t i = 0; i < tasks.size(); ++i) {
      TfTaskRole role;
      role.type = type;
      role.index = static_cast<int>(i);
      role.address = tasks[i];
      if (type == TfTaskType::Chief) role.rank = 0;
      if (type == TfTaskType::Worker) role.rank = chiefs + role.index;
      if (type == TfTaskType::Ps) role.shard = role.index;
      role.self = type == tf.task_type && role.index == tf.task_index;
      roles.push_back(role);
    }
  }
  return roles;
}

const TfTaskRole& tfSelfRole(const std::vector<TfTaskRole>& roles) {
  for (const TfTaskRole& role : roles)
    if (role.self) return role;
  return roles.front();  // unreachable for roles of a parsed TfConfig: its task is in range
}

}  // namespace dtrain
