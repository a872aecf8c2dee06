// What each task of a TF_CONFIG cluster is in dtrain, numbered as
// tf.distribute numbers them (multi_worker_util.id_in_cluster): the chief is
// rank 0 and serves the rendezvous (the coordinator), worker i is rank i + 1;
// without a chief worker 0 is rank 0 and the coordinator, as
// MultiWorkerMirroredStrategy makes worker 0 the chief. ps task i is
// parameter-server shard i; the evaluator trains nothing and evaluates the
// checkpoints the trainers write. Pure functions; thread-safe.
#pragma once
#include <string>
#include <vector>

#include "core/config/tf_config.h"

namespace dtrain {

struct TfTaskRole {
  TfTaskType type = TfTaskType::Worker;
  int index = 0;  // task index within its type
  HostPort address;
  int rank = -1;      // chief and workers: dtrain rank, 0 .. trainers-1; else -1
  int shard = -1;     // ps: parameter-server shard, 0 .. ps-1; else -1
  bool self = false;  // this process's task (TF_CONFIG's "task")

  bool coordinator() const { return rank == 0; }
  // "rank 0 (coordinator)", "rank 2", "parameter-server shard 1", "evaluator".
  std::string roleText() const;
};

// Every task of the cluster: chief, workers, ps, evaluator, each by index.
std::vector<TfTaskRole> tfTaskRoles(const TfConfig& tf);

// The tasks that train (the chief and the workers): the run's world size.
int tfTrainerCount(const TfConfig& tf);

// This process's task among `roles`.
const TfTaskRole& tfSelfRole(const std::vector<TfTaskRole>& roles);

}  // namespace dtrain
