// Validation of [strategy] workers / collective / bucket_mb, of how the
// strategy and [cluster] fit together, and of [cluster] itself.
#include <doctest/doctest.h>

#include "core/config/host_port.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::validateJob;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;
using dtrain::test::TempDir;

namespace {

// The minimal job (lines 1-5), [strategy] at line 7 with its type on line 8,
// [cluster] at line 10 and `cluster_body` from line 11.
std::string clusterJob(const std::string& type, const std::string& cluster_body) {
  return std::string(kMinimalJob) + "\n[strategy]\ntype = \"" + type + "\"\n\n[cluster]\n" + cluster_body;
}

const char* const kTwoHosts =
    "coordinator = \"10.0.0.1:29500\"\n"                                                         // 11
    "token = \"s3cret\"\n"                                                                       // 12
    "hosts = [{ address = \"10.0.0.1\", slots = 2 }, { address = \"10.0.0.2\", slots = 2 }]\n";  // 13

std::string errorOf(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return configErrorOf([&] { validateJob(parseJobString(text, "job.toml", overrides)); });
}

// A two-host multi-worker job with `body` in [cluster] after coordinator and
// token (line 13 on), hosts included.
std::string mwmWith(const std::string& body) {
  return clusterJob("multi_worker_mirrored", "coordinator = \"10.0.0.1:29500\"\ntoken = \"s3cret\"\n" + body +
                                                 "\n[[cluster.hosts]]\naddress = \"10.0.0.1\"\n");
}

}  // namespace

TEST_CASE("multi-process jobs that validate") {
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts)) == "(no ConfigError)");
  CHECK(errorOf(std::string(kMinimalJob) + "\n[strategy]\ntype = \"mirrored\"\nworkers = 64\n") ==
        "(no ConfigError)");
  CHECK(errorOf(clusterJob("mirrored",
                           "coordinator = \"127.0.0.1:29500\"\ntoken = \"t\"\n"
                           "[[cluster.hosts]]\naddress = \"127.0.0.1\"\nslots = 64\n")) ==
        "(no ConfigError)");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts),
                {"strategy.collective=halving_doubling", "strategy.bucket_mb=1024", "strategy.workers=1",
                 "cluster.coordinator=[fe80::1]:1"}) == "(no ConfigError)");
  TempDir dir;
  std::string token_file = dir.write("token", "abc\n");
  CHECK(errorOf(kMinimalJob, {"strategy.type=multi_worker_mirrored", "cluster.coordinator=node0:29500",
                              "cluster.token_file=" + token_file, "cluster.hosts=node0:4,node1:4"}) ==
        "(no ConfigError)");
}

TEST_CASE("[strategy] workers, collective and bucket_mb are range-checked") {
  CHECK(errorOf(std::string(kMinimalJob) + "\n[strategy]\nworkers = 65\n") ==
        "job.toml:8:11: [strategy] workers must be in [1, 64] (got 65)");
  CHECK(errorOf(kMinimalJob, {"strategy.workers=0"}) ==
        "--set strategy.workers=0: [strategy] workers must be in [1, 64] (got 0)");
  CHECK(
      errorOf(std::string(kMinimalJob) + "\n[strategy]\ncollective = \"rign\"\n") ==
      "job.toml:8:14: [strategy] collective must be one of 'auto', 'shared_memory', 'hierarchical', 'ring', "
      "'halving_doubling', "
      "'bcube' (got \"rign\"; did you mean 'ring'?)");
  CHECK(errorOf(kMinimalJob, {"strategy.collective=nccl"}) ==
        "--set strategy.collective=nccl: [strategy] collective must be one of 'auto', 'shared_memory', "
        "'hierarchical', 'ring', "
        "'halving_doubling', 'bcube' (got \"nccl\")");
  CHECK(errorOf(std::string(kMinimalJob) + "\n[strategy]\nbucket_mb = 0\n") ==
        "job.toml:8:13: [strategy] bucket_mb must be in (0, 1024] (got 0.0)");
  CHECK(errorOf(kMinimalJob, {"strategy.bucket_mb=1024.5"}) ==
        "--set strategy.bucket_mb=1024.5: [strategy] bucket_mb must be in (0, 1024] (got 1024.5)");
  CHECK(errorOf(kMinimalJob, {"strategy.bucket_mb=nan"}) ==
        "--set strategy.bucket_mb=nan: [strategy] bucket_mb must be a finite number (got nan)");
}

TEST_CASE("the strategy and [cluster] must agree") {
  CHECK(errorOf(std::string(kMinimalJob) + "\n[strategy]\ntype = \"multi_worker_mirrored\"\n") ==
        "job.toml:8:8: [strategy] type 'multi_worker_mirrored' needs a [cluster] section: coordinator, token "
        "or "
        "token_file, and a [[cluster.hosts]] table for each host");
  CHECK(errorOf(clusterJob("mirrored", kTwoHosts)) ==
        "job.toml:8:8: [strategy] type 'mirrored' runs on one host, but [cluster] lists 2 hosts; use "
        "'multi_worker_mirrored'");
  CHECK(errorOf(clusterJob("central_storage", kTwoHosts)) ==
        "job.toml:8:8: [strategy] type 'central_storage' runs on one host (the variables in one place), but "
        "[cluster] lists 2 hosts; use 'multi_worker_mirrored'");
  CHECK(errorOf(clusterJob("central_storage",
                           "coordinator = \"127.0.0.1:29500\"\ntoken = \"t\"\n"
                           "[[cluster.hosts]]\naddress = \"127.0.0.1\"\nslots = 2\n")) == "(no ConfigError)");
  CHECK(errorOf(clusterJob("one_device", kTwoHosts)) ==
        "job.toml:8:8: [strategy] type 'one_device' runs a single process and takes no [cluster]; use "
        "'multi_worker_mirrored', or remove [cluster]");
  // A defaulted type is reported at the [cluster] header.
  CHECK(errorOf(std::string(kMinimalJob) + "\n[cluster]\ncoordinator = \"a:1\"\n") ==
        "job.toml:7:1: [strategy] type 'one_device' runs a single process and takes no [cluster]; use "
        "'mirrored' "
        "(one host) or 'multi_worker_mirrored', or remove [cluster]");
  CHECK(errorOf(kMinimalJob, {"cluster.hosts=a:2,b:2"}) ==
        "--set cluster.hosts=a:2,b:2: [strategy] type 'one_device' runs a single process and takes no "
        "[cluster]; use 'multi_worker_mirrored', or remove [cluster]");
}

TEST_CASE("[cluster] coordinator must be host:port") {
  CHECK(
      errorOf(clusterJob("multi_worker_mirrored", "token = \"s\"\n[[cluster.hosts]]\naddress = \"a\"\n")) ==
      "job.toml:10:1: [cluster] needs coordinator = \"host:port\" (where node 0 serves the rendezvous, like "
      "\"10.0.0.1:29500\"), or from = \"tf_config\"");
  auto coordinatorError = [](const std::string& coordinator) {
    return errorOf(
        clusterJob("multi_worker_mirrored",
                   "coordinator = \"" + coordinator + "\"\ntoken = \"s\"\nhosts = [{ address = \"a\" }]\n"));
  };
  CHECK(coordinatorError("10.0.0.1") ==
        "job.toml:11:15: [cluster] coordinator must be \"host:port\", like \"10.0.0.1:29500\" (got "
        "\"10.0.0.1\")");
  CHECK(coordinatorError(":29500") ==
        "job.toml:11:15: [cluster] coordinator must be \"host:port\", like \"10.0.0.1:29500\" (got "
        "\":29500\")");
  CHECK(coordinatorError("10.0.0.1:0") ==
        "job.toml:11:15: [cluster] coordinator port must be in [1, 65535] (got \"10.0.0.1:0\")");
  CHECK(coordinatorError("10.0.0.1:65536") ==
        "job.toml:11:15: [cluster] coordinator port must be in [1, 65535] (got \"10.0.0.1:65536\")");
  CHECK(coordinatorError("node0:http") ==
        "job.toml:11:15: [cluster] coordinator port must be in [1, 65535] (got \"node0:http\")");
  CHECK(coordinatorError("node0:99999999999") ==
        "job.toml:11:15: [cluster] coordinator port must be in [1, 65535] (got \"node0:99999999999\")");
  CHECK(
      coordinatorError("fe80::1:29500") ==
      "job.toml:11:15: [cluster] coordinator must put an IPv6 address in brackets, like \"[fe80::1]:29500\" "
      "(got \"fe80::1:29500\")");
  CHECK(coordinatorError("[fe80::1]") ==
        "job.toml:11:15: [cluster] coordinator must be \"host:port\", like \"10.0.0.1:29500\" or "
        "\"[fe80::1]:29500\" (got \"[fe80::1]\")");
  CHECK(coordinatorError("[fe80::1]:29500") == "(no ConfigError)");
  CHECK(coordinatorError("node0.example.org:65535") == "(no ConfigError)");
  CHECK(
      errorOf(clusterJob("multi_worker_mirrored", kTwoHosts), {"cluster.coordinator="}) ==
      "--set cluster.coordinator=: [cluster] coordinator must be \"host:port\", like \"10.0.0.1:29500\" (got "
      "\"\")");
}

TEST_CASE("parseHostPort and joinHostPort") {
  std::string problem;
  auto hp = dtrain::parseHostPort("10.0.0.1:29500", &problem);
  REQUIRE(hp);
  CHECK(hp->host == "10.0.0.1");
  CHECK(hp->port == 29500);
  hp = dtrain::parseHostPort("[::1]:1", &problem);
  REQUIRE(hp);
  CHECK(hp->host == "::1");
  CHECK(hp->port == 1);
  CHECK_FALSE(dtrain::parseHostPort("", &problem));
  CHECK(problem == "must be \"host:port\", like \"10.0.0.1:29500\"");
  CHECK_FALSE(dtrain::parseHostPort("[::1]x:1", &problem));
  CHECK_FALSE(dtrain::parseHostPort("a:-1", &problem));
  CHECK(problem == "port must be in [1, 65535]");
  CHECK(dtrain::joinHostPort("10.0.0.1", 80) == "10.0.0.1:80");
  CHECK(dtrain::joinHostPort("fe80::1", 80) == "[fe80::1]:80");
}

TEST_CASE("[cluster] needs exactly one of token and token_file") {
  const std::string hosts = "hosts = [{ address = \"a\" }]\n";
  CHECK(errorOf(clusterJob("multi_worker_mirrored", "coordinator = \"a:1\"\n" + hosts)) ==
        "job.toml:10:1: [cluster] needs token (a shared secret every worker presents) or token_file (a file "
        "holding it)");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", "coordinator = \"a:1\"\ntoken = \"\"\n" + hosts)) ==
        "job.toml:12:9: [cluster] token must not be empty");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", "coordinator = \"a:1\"\ntoken_file = \"\"\n" + hosts)) ==
        "job.toml:12:14: [cluster] token_file must not be empty");
  CHECK(errorOf(clusterJob("multi_worker_mirrored",
                           "coordinator = \"a:1\"\ntoken = \"s\"\ntoken_file = \"/etc/t\"\n" + hosts)) ==
        "job.toml:13:14: [cluster] token_file and token are both given; use one or the other");
  TempDir dir;
  const std::string missing = dir.file("token");
  CHECK(errorOf(clusterJob("multi_worker_mirrored",
                           "coordinator = \"a:1\"\ntoken_file = \"" + missing + "\"\n" + hosts)) ==
        "job.toml:12:14: [cluster] token_file '" + missing + "' does not exist");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", "coordinator = \"a:1\"\n" + hosts),
                {"cluster.token_file=" + dir.path()}) == "--set cluster.token_file=" + dir.path() +
                                                             ": [cluster] token_file '" + dir.path() +
                                                             "' is a directory, not a file");
}

TEST_CASE("[cluster] hosts are listed once each, with 1 to 64 slots") {
  const std::string head = "coordinator = \"a:1\"\ntoken = \"s\"\n";  // lines 11-12
  CHECK(errorOf(clusterJob("multi_worker_mirrored", head)) ==
        "job.toml:10:1: [cluster] needs hosts: a [[cluster.hosts]] table (address, slots) for each host");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", head + "hosts = []\n")) ==
        "job.toml:13:9: [cluster] hosts must list at least one host (got [])");
  CHECK(errorOf(clusterJob("multi_worker_mirrored",
                           head + "hosts = [{ address = \"a\" }, { address = \"\" }]\n")) ==
        "job.toml:13:41: [cluster] hosts[1].address must not be empty");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", head + "hosts = [{ address = \"10.0.0.1:22\" }]\n")) ==
        "job.toml:13:22: [cluster] hosts[0].address must be a host name or IP address without a port (got "
        "\"10.0.0.1:22\")");
  CHECK(errorOf(clusterJob(
            "multi_worker_mirrored",
            head + "[[cluster.hosts]]\naddress = \"Node1\"\n[[cluster.hosts]]\naddress = \"node1\"\n")) ==
        "job.toml:16:11: [cluster] hosts[1].address \"node1\" is listed twice (first as hosts[0].address)");
  // The brief's own example.
  CHECK(errorOf(clusterJob(
            "multi_worker_mirrored",
            head + "hosts = [{ address = \"a\", slots = 2 },\n         { address = \"b\", slots = 0 }]\n")) ==
        "job.toml:14:35: [cluster] hosts[1].slots must be > 0 (got 0)");
  CHECK(errorOf(
            clusterJob("multi_worker_mirrored", head + "[[cluster.hosts]]\naddress = \"a\"\nslots = 65\n")) ==
        "job.toml:15:9: [cluster] hosts[0].slots must be <= 64 (got 65)");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", head), {"cluster.hosts=a:2,b:0"}) ==
        "--set cluster.hosts=a:2,b:0: [cluster] hosts[1].slots must be > 0 (got 0)");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", head), {"cluster.hosts=a,,b"}) ==
        "--set cluster.hosts=a,,b: [cluster] hosts[1].address must not be empty");
  // A value changed in code, with no line of its own, is reported at its host's entry.
  JobConfig job = parseJobString(
      clusterJob("multi_worker_mirrored", head + "[[cluster.hosts]]\naddress = \"a\"\n"), "job.toml");
  job.cluster.hosts[0].slots = -3;
  CHECK(configErrorOf([&] { validateJob(job); }) ==
        "job.toml:13:1: [cluster] hosts[0].slots must be > 0 (got -3)");
}

TEST_CASE("[cluster] timeouts are positive and the heartbeat beats within its timeout") {
  CHECK(errorOf(mwmWith("join_timeout_s = 0\n")) ==
        "job.toml:13:18: [cluster] join_timeout_s must be > 0 (got 0.0)");
  CHECK(errorOf(mwmWith("heartbeat_interval_s = -1\n")) ==
        "job.toml:13:24: [cluster] heartbeat_interval_s must be > 0 (got -1.0)");
  CHECK(errorOf(mwmWith("heartbeat_timeout_s = 0.0\n")) ==
        "job.toml:13:23: [cluster] heartbeat_timeout_s must be > 0 (got 0.0)");
  CHECK(errorOf(mwmWith("collective_timeout_s = inf\n")) ==
        "job.toml:13:24: [cluster] collective_timeout_s must be a finite number (got inf)");
  CHECK(errorOf(mwmWith("heartbeat_interval_s = 10\n")) ==
        "job.toml:13:24: [cluster] heartbeat_interval_s must be < heartbeat_timeout_s (got 10.0, "
        "heartbeat_timeout_s 10.0)");
  CHECK(errorOf(mwmWith("heartbeat_timeout_s = 0.5\n")) ==
        "job.toml:13:23: [cluster] heartbeat_timeout_s must be > heartbeat_interval_s (got 0.5, "
        "heartbeat_interval_s 1.0)");
  CHECK(errorOf(mwmWith(""), {"cluster.heartbeat_interval_s=20", "cluster.heartbeat_timeout_s=15"}) ==
        "--set cluster.heartbeat_interval_s=20: [cluster] heartbeat_interval_s must be < heartbeat_timeout_s "
        "(got "
        "20.0, heartbeat_timeout_s 15.0)");
  CHECK(errorOf(mwmWith("heartbeat_interval_s = 0.1\nheartbeat_timeout_s = 0.2\n")) == "(no ConfigError)");
}

TEST_CASE(
    "under a launcher, multi_worker_mirrored needs no [cluster], nor hosts, coordinator or token in it") {
  auto launched = [](const std::string& text) {
    return configErrorOf([&] { validateJob(parseJobString(text, "job.toml"), /*under_launcher=*/true); });
  };
  const std::string mwm = std::string(kMinimalJob) + "\n[strategy]\ntype = \"multi_worker_mirrored\"\n";
  CHECK(launched(mwm) == "(no ConfigError)");
  CHECK(launched(clusterJob("multi_worker_mirrored", "heartbeat_timeout_s = 5\n")) == "(no ConfigError)");
  // What is given is still checked.
  CHECK(launched(clusterJob("multi_worker_mirrored", "coordinator = \"nohost\"\n"))
            .find("[cluster] coordinator") != std::string::npos);
  CHECK(launched(clusterJob("multi_worker_mirrored", "token = \"\"\n")) ==
        "job.toml:11:9: [cluster] token must not be empty");
  CHECK(launched(clusterJob("multi_worker_mirrored", "hosts = []\n")) ==
        "job.toml:11:9: [cluster] hosts must list at least one host (got [])");
  // Without a launcher the same jobs are refused.
  CHECK(errorOf(mwm).find("'multi_worker_mirrored' needs a [cluster] section") != std::string::npos);
  // A [cluster] of timeouts alone says nothing of the hosts.
  CHECK(errorOf(clusterJob("multi_worker_mirrored", "heartbeat_timeout_s = 5\n"))
            .find("'multi_worker_mirrored' needs a [cluster] section: coordinator") != std::string::npos);
}

TEST_CASE("[cluster] elastic: mirrored strategies only, not under a launcher; its limits range-checked") {
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts), {"cluster.elastic=true"}) ==
        "(no ConfigError)");
  CHECK(
      errorOf(clusterJob("parameter_server", kTwoHosts), {"cluster.elastic=true"}) ==
      "--set cluster.elastic=true: [cluster] elastic recovers mirrored and multi_worker_mirrored runs, whose "
      "replicas are identical after every step; strategy 'parameter_server' keeps state a lost worker takes "
      "with it: set elastic = false");
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts),
                {"cluster.elastic=true", "cluster.max_restarts=-1"})
            .find("cluster.max_restarts") != std::string::npos);
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts), {"cluster.restart_window_s=0"})
            .find("cluster.restart_window_s") != std::string::npos);
  CHECK(errorOf(clusterJob("multi_worker_mirrored", kTwoHosts), {"cluster.host_cooldown_s=-1"})
            .find("cluster.host_cooldown_s") != std::string::npos);
  const std::string under_launcher = configErrorOf([&] {
    validateJob(
        parseJobString(clusterJob("multi_worker_mirrored", kTwoHosts), "job.toml", {"cluster.elastic=true"}),
        /*under_launcher=*/true);
  });
  CHECK(under_launcher.find("needs dtrain's own processes on each host") != std::string::npos);
  // On one host: a [cluster] of the recovery keys alone, checked as on several.
  const std::string mirrored = std::string(kMinimalJob) + "\n[strategy]\ntype = \"mirrored\"\n";
  CHECK(errorOf(mirrored, {"cluster.elastic=true"}) == "(no ConfigError)");
  CHECK(errorOf(mirrored, {"cluster.elastic=true", "cluster.heartbeat_timeout_s=-1"})
            .find("cluster.heartbeat_timeout_s") != std::string::npos);
  CHECK(errorOf(std::string(kMinimalJob), {"cluster.elastic=true"}).find("strategy 'one_device'") !=
        std::string::npos);
}
