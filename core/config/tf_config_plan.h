// A TF_CONFIG cluster as a dtrain job: the [strategy] and [cluster] it
// implies and this process's place in the run, and which jobs take their
// cluster from TF_CONFIG at all ([cluster] from). Pure: nothing here starts
// or connects anything; the launcher applies the plan.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/config/launch_env.h"
#include "core/config/tf_config.h"

namespace dtrain {

struct TfClusterPlan {
  // "parameter_server" when the cluster has ps tasks (a TensorFlow
  // parameter-server job), else "multi_worker_mirrored".
  std::string strategy_type;
  // The job's [cluster] with what TF_CONFIG says in place of its own
  // coordinator and hosts: coordinator = the coordinator task's address (the
  // chief's, else worker 0's: it serves the rendezvous on the port TensorFlow
  // gave that task); hosts = the distinct hosts of the tasks that train (and
  // of the ps tasks), in rank order, each with slots = how many of those
  // tasks it runs. token, token_file and the timeouts stay the job's:
  // TF_CONFIG has none.
  ClusterSection cluster;
  std::vector<HostPort> ps_shards;  // parameter-server shard i's address
  std::vector<HostPort> evaluator;  // none, or the one evaluator's address
  // This process as a launcher describes its processes (launch_env.h): the
  // orchestrator that set TF_CONFIG started one process per task, so a
  // trainer's rank is its TensorFlow id whatever host order the lists have.
  // source "TF_CONFIG"; node and local ranks count over cluster.hosts;
  // coordinator as above; launch_id a digest of the cluster, the same in
  // every task of one job. A parameter-server job's ps tasks are its last
  // ranks, after the trainers (the shards). nullopt for an evaluator task.
  std::optional<LaunchEnv> self;
};

TfClusterPlan tfClusterPlan(const TfConfig& tf, const JobConfig& job);

// The TF_CONFIG `job` takes its cluster from, read through `getenv_fn`:
//   [cluster] from = "" (the default, also without [cluster]): TF_CONFIG when set, else none;
//   from = "tf_config": TF_CONFIG, which must be set (a ConfigError at the key otherwise);
//   from = "job": none, TF_CONFIG is ignored and [cluster]'s own keys apply.
// Throws ConfigError, one line, for a bad TF_CONFIG (tf_config.h).
std::optional<TfConfig> jobTfConfig(const JobConfig& job,
                                    const std::function<const char*(const char*)>& getenv_fn);

}  // namespace dtrain
