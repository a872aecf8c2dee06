// Reading TF_CONFIG as TensorFlow defines it: the cluster's address lists and
// this process's task; every bad TF_CONFIG is one line naming the field.
#include "core/config/tf_config.h"

#include <doctest/doctest.h>

#include "tests/config/config_test_util.h"

using dtrain::HostPort;
using dtrain::parseTfConfig;
using dtrain::TfConfig;
using dtrain::TfTaskType;
using dtrain::test::configErrorOf;

namespace {

std::string errorOf(const std::string& text) {
  return configErrorOf([&] { parseTfConfig(text); });
}

// "host:port" of each address, for comparing whole lists.
std::vector<std::string> texts(const std::vector<HostPort>& list) {
  std::vector<std::string> out;
  for (const HostPort& a : list) out.push_back(a.host + ":" + std::to_string(a.port));
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("TF_CONFIG of a MultiWorkerMirroredStrategy job: workers only") {
  TfConfig tf = parseTfConfig(
      R"({"cluster": {"worker": ["host1:12345", "host2:23456"]}, "task": {"type": "worker", "index": 1}})");
  CHECK(texts(tf.worker) == Strings{"host1:12345", "host2:23456"});
  CHECK(tf.chief.empty());
  CHECK(tf.ps.empty());
  CHECK(tf.evaluator.empty());
  CHECK(tf.task_type == TfTaskType::Worker);
  CHECK(tf.task_index == 1);
  CHECK(tf.chief_key == "chief");
}

TEST_CASE("TF_CONFIG with a chief, workers, parameter servers and an evaluator") {
  TfConfig tf = parseTfConfig(R"({
    "cluster": {
      "chief": ["c0.example.com:2222"],
      "worker": ["w0.example.com:2222", "w1.example.com:2222"],
      "ps": ["p0.example.com:2222", "p1.example.com:2222"],
      "evaluator": ["e0.example.com:2222"]
    },
    "task": {"type": "ps", "index": 1}
  })");
  CHECK(texts(tf.chief) == Strings{"c0.example.com:2222"});
  CHECK(texts(tf.worker) == Strings{"w0.example.com:2222", "w1.example.com:2222"});
  CHECK(texts(tf.ps) == Strings{"p0.example.com:2222", "p1.example.com:2222"});
  CHECK(texts(tf.evaluator) == Strings{"e0.example.com:2222"});
  CHECK(tf.task_type == TfTaskType::Ps);
  CHECK(tf.task_index == 1);

  tf = parseTfConfig(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"], "evaluator": ["e:1"]},
          "task": {"type": "evaluator", "index": 0}})");
  CHECK(tf.task_type == TfTaskType::Evaluator);
  CHECK(tf.task_index == 0);
}

TEST_CASE("TF_CONFIG ignores rpc_layer, environment and other keys, and reads IPv6 and string indices") {
  // Kubeflow's TFJob writes "environment": "cloud"; gRPC's protocol means nothing to dtrain.
  TfConfig tf = parseTfConfig(
      "\n  {\"rpc_layer\": \"grpc\", \"environment\": \"cloud\", \"session_master\": \"x\", \"extra\": [1],\n"
      "   \"cluster\": {\"worker\": [\"[::1]:2222\", \"[fe80::2]:2223\", \"127.0.0.1:2224\"]},\n"
      "   \"task\": {\"type\": \"worker\", \"index\": \"2\", \"trial\": \"\"}}  \n");
  REQUIRE(tf.worker.size() == 3);
  CHECK(tf.worker[0].host == "::1");
  CHECK(tf.worker[0].port == 2222);
  CHECK(tf.worker[1].host == "fe80::2");
  CHECK(tf.task_index == 2);  // TensorFlow applies int() to the index
}

TEST_CASE("TF_CONFIG's cluster may map task indices to addresses, as tf.train.ClusterSpec takes it") {
  TfConfig tf = parseTfConfig(
      R"({"cluster": {"worker": {"1": "w1:2222", "0": "w0:2222"}}, "task": {"type": "worker", "index": 0}})");
  CHECK(texts(tf.worker) == Strings{"w0:2222", "w1:2222"});
  CHECK(
      errorOf(
          R"({"cluster": {"worker": {"0": "w0:1", "2": "w2:1"}}, "task": {"type": "worker", "index": 0}})") ==
      "TF_CONFIG: cluster.worker has no task 1; dtrain needs every task's address, indices 0 to 1");
  CHECK(errorOf(R"({"cluster": {"worker": {"one": "w0:1"}}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker key \"one\" is not a task index (\"0\", \"1\", ...)");
}

TEST_CASE("TF_CONFIG's legacy \"master\" is the chief") {
  TfConfig tf = parseTfConfig(
      R"({"cluster": {"master": ["m:2222"], "worker": ["w:2222"], "ps": ["p:2222"]},
          "task": {"type": "master", "index": 0}})");
  CHECK(texts(tf.chief) == Strings{"m:2222"});
  CHECK(tf.task_type == TfTaskType::Chief);
  CHECK(tf.chief_key == "master");
  CHECK(tf.keyOf(TfTaskType::Chief) == "master");
  CHECK(errorOf(
            R"({"cluster": {"master": ["m:1"], "chief": ["c:1"]}, "task": {"type": "chief", "index": 0}})") ==
        "TF_CONFIG: cluster has both \"chief\" and \"master\" (the chief's old name); keep \"chief\"");
  CHECK(errorOf(R"({"cluster": {"master": ["m:1"]}, "task": {"type": "chief", "index": 0}})") ==
        "TF_CONFIG: task.type \"chief\" names no list in cluster (it has master)");
}

TEST_CASE("TF_CONFIG that is not JSON, empty, or not an object") {
  CHECK(errorOf("{cluster: 1}") == "TF_CONFIG is not JSON: byte 1: unexpected 'c', expected a string key");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:1",]}})") ==
        "TF_CONFIG is not JSON: byte 30: unexpected ']', expected a JSON value");
  CHECK(errorOf("") ==
        "TF_CONFIG is empty; set it to {\"cluster\": {...}, \"task\": {...}} or leave it unset");
  CHECK(errorOf("  \n") ==
        "TF_CONFIG is empty; set it to {\"cluster\": {...}, \"task\": {...}} or leave it unset");
  CHECK(errorOf("[1, 2]") ==
        "TF_CONFIG must be a JSON object like {\"cluster\": {...}, \"task\": {...}} (got array)");
}

TEST_CASE("TF_CONFIG without a cluster, or with one of the wrong shape") {
  CHECK(errorOf(R"({"task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: no \"cluster\"; give every task's address, like {\"cluster\": {\"worker\": "
        "[\"10.0.0.1:2222\", \"10.0.0.2:2222\"]}, ...}");
  CHECK(errorOf(R"({"cluster": ["a:1"], "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster must be an object of task lists, like {\"worker\": [\"10.0.0.1:2222\"]} (got "
        "array)");
  CHECK(errorOf(R"({"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker must be a list of \"host:port\" addresses (got string)");
  CHECK(
      errorOf(
          R"({"cluster": {"worker": ["a:1"], "trainer": ["b:1"]}, "task": {"type": "worker", "index": 0}})") ==
      "TF_CONFIG: cluster.trainer is not a task type; use chief, worker, ps or evaluator");
  CHECK(errorOf(R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}})") ==
        "TF_CONFIG: cluster has no chief or worker; list the tasks that train, like \"worker\": "
        "[\"10.0.0.1:2222\"]");
  CHECK(errorOf(R"({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}})") ==
        "TF_CONFIG: cluster.chief lists 2 addresses; a cluster has at most one chief");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:1"], "evaluator": ["b:1", "c:1"]}, "task": {"type": "worker",
                 "index": 0}})") ==
        "TF_CONFIG: cluster.evaluator lists 2 addresses; a cluster has at most one evaluator");
  // A key holding a newline is quoted, so the message stays one line.
  CHECK(errorOf(R"({"cluster": {"a\nb": ["a:1"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.\"a\\nb\" is not a task type; use chief, worker, ps or evaluator");
}

TEST_CASE("TF_CONFIG addresses without a port, with a bad port, or not strings") {
  CHECK(
      errorOf(
          R"({"cluster": {"worker": ["a:1"], "ps": ["p0:1", "host"]}, "task": {"type": "worker", "index": 0}})") ==
      "TF_CONFIG: cluster.ps[1] \"host\" has no port; write \"host:port\", like \"10.0.0.1:2222\"");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:99999"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[0] \"a:99999\": port must be in [1, 65535]");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:0"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[0] \"a:0\": port must be in [1, 65535]");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:http"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[0] \"a:http\": port must be in [1, 65535]");
  CHECK(errorOf(R"({"cluster": {"worker": [":2222"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[0] \":2222\": must be \"host:port\", like \"10.0.0.1:29500\"");
  CHECK(errorOf(R"({"cluster": {"worker": ["fe80::1:2222"]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[0] \"fe80::1:2222\": must put an IPv6 address in brackets, like "
        "\"[fe80::1]:29500\"");
  CHECK(errorOf(R"({"cluster": {"worker": ["a:1", 2222]}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: cluster.worker[1] must be a \"host:port\" string (got number)");
}

TEST_CASE("TF_CONFIG with one address twice") {
  CHECK(
      errorOf(R"({"cluster": {"chief": ["Node1:2222"], "worker": ["node2:2222", "node1:2222"]},
                    "task": {"type": "worker", "index": 0}})") ==
      "TF_CONFIG: cluster.worker[1] \"node1:2222\" is also cluster.chief[0]; every task needs an address of "
      "its own");
  // One host, two ports: two tasks, as in TensorFlow's localhost examples.
  CHECK(parseTfConfig(R"({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker",
                          "index": 1}})")
            .worker.size() == 2);
}

TEST_CASE("TF_CONFIG without a task, or with a bad type") {
  const std::string cluster = R"("cluster": {"chief": ["c:1"], "worker": ["a:1", "b:1"]})";
  CHECK(errorOf("{" + cluster + "}") ==
        "TF_CONFIG: no \"task\"; say which task this process is, like {\"task\": {\"type\": \"worker\", "
        "\"index\": 0}}");
  CHECK(errorOf("{" + cluster + R"(, "task": "worker:0"})") ==
        "TF_CONFIG: task must be an object like {\"type\": \"worker\", \"index\": 0} (got string)");
  CHECK(errorOf("{" + cluster + R"(, "task": {"index": 0}})") ==
        "TF_CONFIG: task has no \"type\"; use chief, worker, ps or evaluator");
  CHECK(errorOf("{" + cluster + R"(, "task": {"type": 1, "index": 0}})") ==
        "TF_CONFIG: task.type must be a string, one of chief, worker, ps or evaluator (got number)");
  CHECK(errorOf("{" + cluster + R"(, "task": {"type": "foo", "index": 0}})") ==
        "TF_CONFIG: task.type \"foo\" is not one of chief, worker, ps, evaluator");
  CHECK(errorOf("{" + cluster + R"(, "task": {"type": "ps", "index": 0}})") ==
        "TF_CONFIG: task.type \"ps\" names no list in cluster (it has chief, worker)");
}

TEST_CASE("TF_CONFIG task.index missing, not an integer, negative or out of range") {
  const std::string cluster = R"({"cluster": {"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "task": )";
  CHECK(errorOf(cluster + R"({"type": "worker"}})") ==
        "TF_CONFIG: task has no \"index\"; give this process's place in cluster.worker, which lists 2 "
        "addresses (0 to 1)");
  CHECK(errorOf(cluster + R"({"type": "worker", "index": 1.5}})") ==
        "TF_CONFIG: task.index must be an integer (got 1.5)");
  CHECK(errorOf(cluster + R"({"type": "worker", "index": "one"}})") ==
        "TF_CONFIG: task.index must be an integer (got \"one\")");
  CHECK(errorOf(cluster + R"({"type": "worker", "index": null}})") ==
        "TF_CONFIG: task.index must be an integer (got null)");
  CHECK(errorOf(cluster + R"({"type": "worker", "index": -1}})") ==
        "TF_CONFIG: task.index -1 is out of range: cluster.worker lists 2 addresses (0 to 1)");
  CHECK(errorOf(cluster + R"({"type": "worker", "index": 3}})") ==
        "TF_CONFIG: task.index 3 is out of range: cluster.worker lists 2 addresses (0 to 1)");
  CHECK(errorOf(cluster + R"({"type": "chief", "index": 1}})") ==
        "TF_CONFIG: task.index 1 is out of range: cluster.chief lists 1 address (index 0)");
  CHECK(errorOf(R"({"cluster": {"chief": ["c:1"], "worker": []}, "task": {"type": "worker", "index": 0}})") ==
        "TF_CONFIG: task.index 0 is out of range: cluster.worker lists no addresses");
  // An integer too large for the index is out of range, not wrapped around.
  CHECK(errorOf(cluster + R"({"type": "worker", "index": 4294967296}})") ==
        "TF_CONFIG: task.index 4294967296 is out of range: cluster.worker lists 2 addresses (0 to 1)");
}

TEST_CASE("TF_CONFIG comes from the environment only when set and not empty") {
  auto textOf = [](const char* value) {
    return dtrain::tfConfigText([value](const char* name) -> const char* {
      return std::string(name) == "TF_CONFIG" ? value : nullptr;
    });
  };
  CHECK_FALSE(textOf(nullptr).has_value());
  CHECK_FALSE(textOf("").has_value());
  CHECK(textOf("{}") == std::optional<std::string>("{}"));
}
