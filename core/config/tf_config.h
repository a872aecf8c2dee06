// TF_CONFIG: the JSON environment variable TensorFlow's tf.distribute reads
// (and that Kubeflow's TFJob, Vertex AI and SageMaker set in every process of
// a multi-worker job): the whole cluster and this process's own task.
//
//   {"cluster": {"chief": ["c0:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]},
//    "task": {"type": "worker", "index": 1}}
//
// Read as TensorFlow reads it (TFConfigClusterResolver, tf.train.ClusterSpec,
// multi_worker_util._validate_cluster_spec):
//   - cluster maps a task type to a list of "host:port" addresses, or to an
//     object from task index to address ({"0": "w0:2222", "1": "w1:2222"});
//     dtrain needs every task's address, so the indices must run 0..N-1.
//   - task types are chief, worker, ps and evaluator, at most one chief and
//     one evaluator. "master", the chief's name in TF 1 Estimator jobs (Cloud
//     ML Engine), is read as the chief; a cluster may not have both.
//   - task.index is an integer, or a string holding one (TensorFlow applies
//     int() to it); task.type must name a list the cluster has.
//   - "rpc_layer" (gRPC's protocol), "environment" (Estimator on Google's
//     infrastructure), "session_master" and any other top-level key are
//     ignored: dtrain has its own transport and rendezvous.
// Stricter than TensorFlow, because dtrain starts and connects every task
// itself: no "cluster" or no "task" is an error (TensorFlow would then train
// in one process), as are a cluster key that is no task type, a port outside
// 1..65535 and two tasks at one address.
//
// Every error is a ConfigError of one line that starts with "TF_CONFIG" and
// names the field: `TF_CONFIG: task.index 3 is out of range: cluster.worker
// lists 2 addresses (0 to 1)`. Pure functions; thread-safe.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config/host_port.h"

namespace dtrain {

// In the order dtrain lists them: the coordinator first, the trainers, then the rest.
enum class TfTaskType { Chief, Worker, Ps, Evaluator };

constexpr TfTaskType kTfTaskTypes[] = {TfTaskType::Chief, TfTaskType::Worker, TfTaskType::Ps,
                                       TfTaskType::Evaluator};

// "chief", "worker", "ps", "evaluator": the names TF_CONFIG uses.
const char* tfTaskTypeName(TfTaskType type);

struct TfConfig {
  // The addresses of each task type's tasks, by task index.
  std::vector<HostPort> chief;  // at most one
  std::vector<HostPort> worker;
  std::vector<HostPort> ps;
  std::vector<HostPort> evaluator;  // at most one
  // This process's task.
  TfTaskType task_type = TfTaskType::Worker;
  int task_index = 0;
  // "master" when the cluster named its chief so (TF 1 Estimator); for messages.
  std::string chief_key = "chief";

  const std::vector<HostPort>& tasks(TfTaskType type) const;
  // The key of `type`'s list as the TF_CONFIG text spelt it ("chief" or "master" for the chief).
  std::string keyOf(TfTaskType type) const;
};

// Parses TF_CONFIG's text. Throws ConfigError (one line, see above).
TfConfig parseTfConfig(const std::string& text);

// TF_CONFIG's text from the environment through `getenv_fn` (std::getenv or a
// fake); nullopt when it is unset or empty, as launch_env.h treats launcher
// variables.
std::optional<std::string> tfConfigText(const std::function<const char*(const char*)>& getenv_fn);

}  // namespace dtrain
