// What a TF_CONFIG cluster is in dtrain: each task's role, the [strategy] and
// [cluster] it implies, this process's place, and [cluster] from.
#include "core/config/tf_config_plan.h"

#include <doctest/doctest.h>

#include <map>

#include "core/config/parse_job.h"
#include "core/config/tf_config_roles.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::ClusterHost;
using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::parseTfConfig;
using dtrain::TfClusterPlan;
using dtrain::TfConfig;
using dtrain::TfTaskRole;
using dtrain::TfTaskType;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;

namespace {

// "worker 1 w1:2222 rank 2 (self)": one role per line, for comparing them all.
std::vector<std::string> roleLines(const TfConfig& tf) {
  std::vector<std::string> lines;
  for (const TfTaskRole& r : dtrain::tfTaskRoles(tf))
    lines.push_back(std::string(dtrain::tfTaskTypeName(r.type)) + " " + std::to_string(r.index) + " " +
                    r.address.host + ":" + std::to_string(r.address.port) + " " + r.roleText() +
                    (r.self ? " (self)" : ""));
  return lines;
}

// "a:2" per host.
std::vector<std::string> hostLines(const std::vector<ClusterHost>& hosts) {
  std::vector<std::string> lines;
  for (const ClusterHost& h : hosts) lines.push_back(h.address + ":" + std::to_string(h.slots));
  return lines;
}

using Strings = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

std::optional<TfConfig> tfConfigFor(const JobConfig& job, const Env& env) {
  return dtrain::jobTfConfig(job, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

const char* const kWorkerOnly =
    R"({"cluster": {"worker": ["w0:2222", "w1:2222", "w2:2222"]}, "task": {"type": "worker", "index": 0}})";

// A TensorFlow parameter-server job: chief (coordinator), 2 workers on one host, 2 ps.
const char* const kPsJob = R"({"cluster": {"chief": ["c:2222"], "worker": ["h1:2222", "h1:2223"],
    "ps": ["p0:2222", "p1:2222"], "evaluator": ["e:2222"]}, "task": {"type": "worker", "index": 1}})";

}  // namespace

TEST_CASE("TF_CONFIG roles: without a chief worker 0 is rank 0 and the coordinator") {
  TfConfig tf = parseTfConfig(
      R"({"cluster": {"worker": ["w0:2222", "w1:2222", "w2:2222"]}, "task": {"type": "worker", "index": 2}})");
  CHECK(roleLines(tf) == Strings{"worker 0 w0:2222 rank 0 (coordinator)", "worker 1 w1:2222 rank 1",
                                 "worker 2 w2:2222 rank 2 (self)"});
  CHECK(dtrain::tfTrainerCount(tf) == 3);
  CHECK(dtrain::tfSelfRole(dtrain::tfTaskRoles(tf)).rank == 2);
}

TEST_CASE("TF_CONFIG roles: the chief is rank 0, workers follow, ps are shards, the evaluator evaluates") {
  TfConfig tf = parseTfConfig(kPsJob);
  CHECK(roleLines(tf) == Strings{"chief 0 c:2222 rank 0 (coordinator)", "worker 0 h1:2222 rank 1",
                                 "worker 1 h1:2223 rank 2 (self)", "ps 0 p0:2222 parameter-server shard 0",
                                 "ps 1 p1:2222 parameter-server shard 1", "evaluator 0 e:2222 evaluator"});
  CHECK(dtrain::tfTrainerCount(tf) == 3);
}

TEST_CASE("TF_CONFIG as a job: a worker-only cluster is multi_worker_mirrored, one slot per host") {
  JobConfig job = parseJobString(
      std::string(kMinimalJob) + "\n[cluster]\nfrom = \"tf_config\"\ntoken = \"s\"\n", "job.toml");
  TfClusterPlan plan = dtrain::tfClusterPlan(parseTfConfig(kWorkerOnly), job);
  CHECK(plan.strategy_type == "multi_worker_mirrored");
  CHECK(plan.cluster.present);
  CHECK(plan.cluster.from == "tf_config");
  CHECK(plan.cluster.coordinator == "w0:2222");
  CHECK(hostLines(plan.cluster.hosts) == Strings{"w0:1", "w1:1", "w2:1"});
  CHECK(plan.cluster.token == "s");  // TF_CONFIG has no secret: the job's stays
  CHECK(plan.ps_shards.empty());
  REQUIRE(plan.self.has_value());
  CHECK(plan.self->source == "TF_CONFIG");
  CHECK(plan.self->rank == 0);
  CHECK(plan.self->world_size == 3);
  CHECK(plan.self->node == 0);
  CHECK(plan.self->local_rank == 0);
  CHECK(plan.self->local_world_size == 1);
  CHECK(plan.self->coordinator == "w0:2222");
}

TEST_CASE("TF_CONFIG as a job: a TensorFlow parameter-server job is a dtrain parameter_server job") {
  JobConfig job = parseJobString(kMinimalJob, "job.toml");
  TfClusterPlan plan = dtrain::tfClusterPlan(parseTfConfig(kPsJob), job);
  CHECK(plan.strategy_type == "parameter_server");
  CHECK(plan.cluster.coordinator == "c:2222");
  // The chief's host, h1 running both workers, then the ps tasks' hosts.
  CHECK(hostLines(plan.cluster.hosts) == Strings{"c:1", "h1:2", "p0:1", "p1:1"});
  REQUIRE(plan.ps_shards.size() == 2);
  CHECK(plan.ps_shards[1].host == "p1");
  CHECK(plan.evaluator.size() == 1);
  REQUIRE(plan.self.has_value());
  CHECK(plan.self->rank == 2);
  CHECK(plan.self->world_size == 5);  // 3 trainers, then the 2 shards
  CHECK(plan.self->node == 1);
  CHECK(plan.self->local_rank == 1);  // h1's second trainer
  CHECK(plan.self->local_world_size == 2);
  CHECK(plan.self->launch_id.rfind("tf-", 0) == 0);

  // Every task of one job gets one launch id; a ps task is a shard, after the trainers.
  TfConfig ps_task = parseTfConfig(kPsJob);
  ps_task.task_type = TfTaskType::Ps;
  ps_task.task_index = 1;
  TfClusterPlan ps_plan = dtrain::tfClusterPlan(ps_task, job);
  REQUIRE(ps_plan.self.has_value());
  CHECK(ps_plan.self->rank == 4);
  CHECK(ps_plan.self->node == 3);
  CHECK(ps_plan.self->launch_id == plan.self->launch_id);
  TfConfig evaluator_task = parseTfConfig(kPsJob);
  evaluator_task.task_type = TfTaskType::Evaluator;
  evaluator_task.task_index = 0;
  CHECK_FALSE(dtrain::tfClusterPlan(evaluator_task, job).self.has_value());
  TfConfig chief_task = parseTfConfig(kPsJob);
  chief_task.task_type = TfTaskType::Chief;
  chief_task.task_index = 0;
  CHECK(dtrain::tfClusterPlan(chief_task, job).self->launch_id == plan.self->launch_id);
}

TEST_CASE("[cluster] from decides whether TF_CONFIG is read") {
  const Env env = {{"TF_CONFIG", kWorkerOnly}};
  JobConfig plain = parseJobString(kMinimalJob, "job.toml");
  CHECK(tfConfigFor(plain, env).has_value());  // the default: TF_CONFIG when set
  CHECK_FALSE(tfConfigFor(plain, {}).has_value());
  JobConfig from_job = parseJobString(kMinimalJob, "job.toml", {"cluster.from=job"});
  CHECK_FALSE(tfConfigFor(from_job, env).has_value());
  JobConfig from_tf =
      parseJobString(std::string(kMinimalJob) + "\n[cluster]\nfrom = \"tf_config\"\n", "job.toml");
  CHECK(tfConfigFor(from_tf, env)->worker.size() == 3);
  CHECK(configErrorOf([&] { tfConfigFor(from_tf, {}); }) ==
        "job.toml:8:8: [cluster] from = \"tf_config\" needs TF_CONFIG in the environment, which is not set; "
        "set "
        "it, or remove from and give coordinator and hosts");
  CHECK(configErrorOf([&] {
          tfConfigFor(plain, {{"TF_CONFIG", "{"}});
        }) == "TF_CONFIG is not JSON: byte 1: unexpected end of input, expected a string key");
}

TEST_CASE("[cluster] from is validated, and with tf_config the job names no coordinator or hosts") {
  auto errorOf = [](const std::string& cluster_body, const std::vector<std::string>& overrides = {}) {
    return configErrorOf([&] {
      validateJob(parseJobString(std::string(kMinimalJob) +
                                     "\n[strategy]\ntype = \"multi_worker_mirrored\"\n\n[cluster]\n" +
                                     cluster_body,
                                 "job.toml", overrides));
    });
  };
  CHECK(errorOf("from = \"tf_config\"\ntoken = \"s\"\n") == "(no ConfigError)");
  CHECK(errorOf("from = \"tfconfig\"\ntoken = \"s\"\n") ==
        "job.toml:11:8: [cluster] from must be one of '', 'tf_config', 'job' (got \"tfconfig\"; did you mean "
        "'tf_config'?)");
  CHECK(errorOf("from = \"tf_config\"\ntoken = \"s\"\ncoordinator = \"a:1\"\n") ==
        "job.toml:13:15: [cluster] coordinator must not be given with from = \"tf_config\": TF_CONFIG names "
        "the "
        "coordinator (its chief, else worker 0)");
  CHECK(
      errorOf("from = \"tf_config\"\ntoken = \"s\"\n", {"cluster.hosts=a:2"}) ==
      "--set cluster.hosts=a:2: [cluster] hosts must not be given with from = \"tf_config\": TF_CONFIG lists "
      "the hosts");
  CHECK(errorOf("from = \"tf_config\"\n") ==
        "job.toml:10:1: [cluster] needs token (a shared secret every worker presents) or token_file (a file "
        "holding it)");
  CHECK(
      errorOf("from = \"job\"\ntoken = \"s\"\n") ==
      "job.toml:10:1: [cluster] needs coordinator = \"host:port\" (where node 0 serves the rendezvous, like "
      "\"10.0.0.1:29500\"), or from = \"tf_config\"");
}
