// Reading the multi-process keys: [strategy] workers / collective / bucket_mb,
// and [cluster] with its hosts, from the job file and from --set.
#include <doctest/doctest.h>

#include "core/config/parse_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;

TEST_CASE("the strategy and cluster keys have their documented defaults") {
  JobConfig job = parseJobString("", "job.toml");
  CHECK(job.strategy.type == "one_device");
  CHECK(job.strategy.workers == 2);
  CHECK(job.strategy.collective == "auto");
  CHECK(job.strategy.bucket_mb == 4.0);
  CHECK_FALSE(job.cluster.present);
  CHECK(job.cluster.coordinator == "");
  CHECK(job.cluster.token == "");
  CHECK(job.cluster.token_file == "");
  CHECK(job.cluster.hosts.empty());
  CHECK(job.cluster.join_timeout_s == 300.0);
  CHECK(job.cluster.heartbeat_interval_s == 1.0);
  CHECK(job.cluster.heartbeat_timeout_s == 10.0);
  CHECK(job.cluster.collective_timeout_s == 300.0);
}

TEST_CASE("[strategy] and [cluster] keys are read with their positions") {
  JobConfig job = parseJobString(
      "[strategy]\n"                          // 1
      "type = \"multi_worker_mirrored\"\n"    // 2
      "workers = 4\n"                         // 3
      "collective = \"ring\"\n"               // 4
      "bucket_mb = 25\n"                      // 5
      "\n"                                    // 6
      "[cluster]\n"                           // 7
      "coordinator = \"10.0.0.1:29500\"\n"    // 8
      "token_file = \"/etc/dtrain/token\"\n"  // 9
      "join_timeout_s = 60\n"                 // 10
      "heartbeat_interval_s = 0.5\n"          // 11
      "heartbeat_timeout_s = 5.0\n"           // 12
      "collective_timeout_s = 120\n"          // 13
      "\n"                                    // 14
      "[[cluster.hosts]]\n"                   // 15
      "address = \"10.0.0.1\"\n"              // 16
      "slots = 2\n"                           // 17
      "\n"                                    // 18
      "[[cluster.hosts]]\n"                   // 19
      "address = \"node2\"\n",                // 20
      "job.toml");
  CHECK(job.strategy.type == "multi_worker_mirrored");
  CHECK(job.strategy.workers == 4);
  CHECK(job.strategy.collective == "ring");
  CHECK(job.strategy.bucket_mb == 25.0);  // an integer is fine for a float
  CHECK(job.cluster.present);
  CHECK(job.cluster.coordinator == "10.0.0.1:29500");
  CHECK(job.cluster.token == "");
  CHECK(job.cluster.token_file == "/etc/dtrain/token");
  CHECK(job.cluster.join_timeout_s == 60.0);
  CHECK(job.cluster.heartbeat_interval_s == 0.5);
  CHECK(job.cluster.heartbeat_timeout_s == 5.0);
  CHECK(job.cluster.collective_timeout_s == 120.0);
  REQUIRE(job.cluster.hosts.size() == 2);
  CHECK(job.cluster.hosts[0].address == "10.0.0.1");
  CHECK(job.cluster.hosts[0].slots == 2);
  CHECK(job.cluster.hosts[0].pos.str() == "job.toml:15:1");
  CHECK(job.cluster.hosts[1].address == "node2");
  CHECK(job.cluster.hosts[1].slots == 1);  // the default
  CHECK(job.cluster.hosts[1].pos.str() == "job.toml:19:1");
  CHECK(job.posOf("strategy.workers").str() == "job.toml:3:11");
  CHECK(job.posOf("strategy.bucket_mb").str() == "job.toml:5:13");
  CHECK(job.posOf("cluster").str() == "job.toml:7:1");
  CHECK(job.posOf("cluster.coordinator").str() == "job.toml:8:15");
  CHECK(job.posOf("cluster.hosts").str() == "job.toml:15:1");
  CHECK(job.posOf("cluster.hosts[0].address").str() == "job.toml:16:11");
  CHECK(job.posOf("cluster.hosts[0].slots").str() == "job.toml:17:9");
  CHECK(job.posOf("cluster.hosts[1].address").str() == "job.toml:20:11");
  CHECK(job.positions.count("cluster.hosts[1].slots") == 0);
}

TEST_CASE("hosts can be an inline array of tables") {
  JobConfig job = parseJobString(
      "[cluster]\n"
      "token = \"abc\"\n"
      "hosts = [{ address = \"10.0.0.1\", slots = 2 },\n"
      "         { slots = 3, address = \"fe80::1\" }]\n",
      "job.toml");
  CHECK(job.cluster.present);
  CHECK(job.cluster.token == "abc");
  REQUIRE(job.cluster.hosts.size() == 2);
  CHECK(job.cluster.hosts[0].address == "10.0.0.1");
  CHECK(job.cluster.hosts[0].slots == 2);
  CHECK(job.cluster.hosts[1].address == "fe80::1");
  CHECK(job.cluster.hosts[1].slots == 3);
  CHECK(job.posOf("cluster.hosts").str() == "job.toml:3:9");
  CHECK(job.cluster.hosts[0].pos.str() == "job.toml:3:10");
  CHECK(job.cluster.hosts[1].pos.str() == "job.toml:4:10");
  CHECK(job.posOf("cluster.hosts[0].slots").str() == "job.toml:3:42");
  CHECK(job.posOf("cluster.hosts[1].slots").str() == "job.toml:4:20");
}

TEST_CASE("hosts can be the short text form, as on --set") {
  JobConfig job =
      parseJobString("[cluster]\ntoken = \"abc\"\nhosts = \"10.0.0.1:2, node7, [fe80::1]:4\"\n", "job.toml");
  REQUIRE(job.cluster.hosts.size() == 3);
  CHECK(job.cluster.hosts[0].address == "10.0.0.1");
  CHECK(job.cluster.hosts[0].slots == 2);
  CHECK(job.cluster.hosts[1].address == "node7");
  CHECK(job.cluster.hosts[2].address == "fe80::1");
  CHECK(job.cluster.hosts[2].slots == 4);
  CHECK(job.posOf("cluster.hosts").str() == "job.toml:3:9");
  CHECK(job.cluster.hosts[2].pos.str() == "job.toml:3:9");
}

TEST_CASE("[[cluster.hosts]] alone is a [cluster]") {
  JobConfig job = parseJobString("[[cluster.hosts]]\naddress = \"a\"\n", "job.toml");
  CHECK(job.cluster.present);
  CHECK(job.posOf("cluster").str() == "job.toml:1:1");
  REQUIRE(job.cluster.hosts.size() == 1);
  CHECK(job.cluster.hosts[0].address == "a");
}

TEST_CASE("misspelt cluster keys and host-entry keys get a suggestion") {
  CHECK(configErrorOf([] { parseJobString("[cluster]\ncordinator = \"a:1\"\n", "job.toml"); }) ==
        "job.toml:2:1: [cluster] unknown key 'cordinator' (did you mean 'coordinator'?)");
  CHECK(configErrorOf([] { parseJobString("[cluster]\nhost = []\n", "job.toml"); }) ==
        "job.toml:2:1: [cluster] unknown key 'host' (did you mean 'hosts'?)");
  CHECK(configErrorOf([] { parseJobString("[cluster]\nheartbeat_timeout = 3\n", "job.toml"); }) ==
        "job.toml:2:1: [cluster] unknown key 'heartbeat_timeout' (did you mean 'heartbeat_timeout_s'?)");
  CHECK(configErrorOf([] { parseJobString("[strategy]\nworker = 3\n", "job.toml"); }) ==
        "job.toml:2:1: [strategy] unknown key 'worker' (did you mean 'workers'?)");
  CHECK(configErrorOf([] { parseJobString("[clustre]\n", "job.toml"); }) ==
        "job.toml:1:1: unknown section [clustre] (did you mean [cluster]?)");
  CHECK(configErrorOf([] {
          parseJobString("[[cluster.hosts]]\naddress = \"a\"\n\n[[cluster.hosts]]\nadress = \"b\"\n",
                         "job.toml");
        }) == "job.toml:5:1: [cluster] hosts[1] unknown key 'adress' (did you mean 'address'?)");
  CHECK(configErrorOf([] {
          parseJobString("[cluster]\nhosts = [{ address = \"a\", slot = 2 }]\n", "job.toml");
        }) == "job.toml:2:27: [cluster] hosts[0] unknown key 'slot' (did you mean 'slots'?)");
  CHECK(configErrorOf([] {
          parseJobString("[cluster]\nhosts = [{ address = \"a\", weight = 2 }]\n", "job.toml");
        }) == "job.toml:2:27: [cluster] hosts[0] unknown key 'weight'");
  CHECK(configErrorOf([] { parseJobString("token_file = \"x\"\n", "job.toml"); }) ==
        "job.toml:1:1: key 'token_file' is outside any section; put it under [cluster]");
}

TEST_CASE("malformed hosts are reported with the entry's index") {
  CHECK(configErrorOf([] { parseJobString("[cluster]\nhosts = 3\n", "job.toml"); }) ==
        "job.toml:2:9: [cluster] hosts must be an array of tables ([[cluster.hosts]] or [{ address = "
        "\"10.0.0.1\", slots = 2 }, ...]) (got integer 3)");
  CHECK(configErrorOf([] { parseJobString("[cluster]\nhosts = \"a:2, b:x\"\n", "job.toml"); }) ==
        "job.toml:2:9: [cluster] hosts[1].slots must be an integer (got string \"x\")");
  CHECK(configErrorOf([] { parseJobString("[cluster]\nhosts = [\"10.0.0.1\"]\n", "job.toml"); }) ==
        "job.toml:2:10: [cluster] hosts[0] must be a table like { address = \"10.0.0.1\", slots = 2 } (got "
        "string \"10.0.0.1\")");
  CHECK(configErrorOf([] { parseJobString("[[cluster.hosts]]\nslots = 2\n", "job.toml"); }) ==
        "job.toml:1:1: [cluster] hosts[0] needs 'address'");
  CHECK(configErrorOf([] {
          parseJobString("[cluster]\nhosts = [{ address = \"a\" }, { address = 10 }]\n", "job.toml");
        }) == "job.toml:2:41: [cluster] hosts[1].address must be a string (got integer 10)");
  CHECK(configErrorOf([] {
          parseJobString("[[cluster.hosts]]\naddress = \"a\"\nslots = \"2\"\n", "job.toml");
        }) == "job.toml:3:9: [cluster] hosts[0].slots must be an integer (got string \"2\")");
  CHECK(configErrorOf(
            [] { parseJobString("[[cluster.hosts]]\naddress = \"a\"\nslots = 9999999999\n", "job.toml"); }) ==
        "job.toml:3:9: [cluster] hosts[0].slots must be an integer between -2147483648 and 2147483647 (got "
        "integer 9999999999)");
}

TEST_CASE("new keys are type-checked") {
  CHECK(configErrorOf([] { parseJobString("[strategy]\nworkers = 2.5\n", "job.toml"); }) ==
        "job.toml:2:11: [strategy] workers must be an integer (got float 2.5)");
  CHECK(configErrorOf([] { parseJobString("[strategy]\nbucket_mb = \"4MB\"\n", "job.toml"); }) ==
        "job.toml:2:13: [strategy] bucket_mb must be a float (got string \"4MB\")");
  CHECK(configErrorOf([] { parseJobString("[cluster]\ncoordinator = 29500\n", "job.toml"); }) ==
        "job.toml:2:15: [cluster] coordinator must be a string (got integer 29500)");
  CHECK(configErrorOf([] { parseJobString("[cluster]\ncluster = 1\n[cluster.x]\n", "job.toml"); }) ==
        "job.toml:2:1: [cluster] unknown key 'cluster'");
}

TEST_CASE("--set reaches the new strategy and cluster keys") {
  JobConfig job = parseJobString(kMinimalJob, "job.toml",
                                 {"strategy.workers=4", "strategy.collective=bcube", "strategy.bucket_mb=0.5",
                                  "cluster.coordinator=10.0.0.1:29500", "cluster.token_file=/run/token",
                                  "cluster.heartbeat_timeout_s=30"});
  CHECK(job.strategy.workers == 4);
  CHECK(job.strategy.collective == "bcube");
  CHECK(job.strategy.bucket_mb == 0.5);
  CHECK(job.cluster.present);  // setting a cluster key gives the job a [cluster]
  CHECK(job.cluster.coordinator == "10.0.0.1:29500");
  CHECK(job.cluster.token_file == "/run/token");
  CHECK(job.cluster.heartbeat_timeout_s == 30.0);
  CHECK(job.posOf("cluster.coordinator").str() == "--set cluster.coordinator=10.0.0.1:29500");
  CHECK(job.posOf("cluster").str() == "--set cluster.coordinator=10.0.0.1:29500");
  CHECK(job.posOf("strategy.workers").str() == "--set strategy.workers=4");

  JobConfig plain = parseJobString(kMinimalJob, "job.toml", {"strategy.workers=4"});
  CHECK_FALSE(plain.cluster.present);

  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"strategy.workers=many"}); }) ==
        "--set strategy.workers=many: [strategy] workers must be an integer (got string \"many\")");
  CHECK(
      configErrorOf([] { parseJobString("", "job.toml", {"hosts=a:2"}); }) ==
      "--set hosts=a:2: 'hosts' does not name a section; expected section.key=value, like optimizer.lr=0.01 "
      "(did you mean cluster.hosts?)");
  CHECK(
      configErrorOf([] { parseJobString("", "job.toml", {"cluster.join_timeout=5"}); }) ==
      "--set cluster.join_timeout=5: [cluster] unknown key 'join_timeout' (did you mean 'join_timeout_s'?)");
}

TEST_CASE("--set cluster.token keeps the secret out of messages") {
  JobConfig job = parseJobString("", "job.toml", {"cluster.token=s3cret"});
  CHECK(job.cluster.token == "s3cret");
  CHECK(job.posOf("cluster.token").str() == "--set cluster.token=<hidden>");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"cluster.token=[1]"}); }) ==
        "--set cluster.token=<hidden>: [cluster] token must be a string (got array [1])");
}

TEST_CASE("--set cluster.hosts takes address:slots lists and replaces the file's hosts") {
  const std::string file = "[[cluster.hosts]]\naddress = \"old\"\nslots = 8\n";
  JobConfig job = parseJobString(file, "job.toml", {"cluster.hosts=10.0.0.1:2, node-b ,[fe80::1]:4,fe80::2"});
  REQUIRE(job.cluster.hosts.size() == 4);
  CHECK(job.cluster.hosts[0].address == "10.0.0.1");
  CHECK(job.cluster.hosts[0].slots == 2);
  CHECK(job.cluster.hosts[1].address == "node-b");
  CHECK(job.cluster.hosts[1].slots == 1);
  CHECK(job.cluster.hosts[2].address == "fe80::1");
  CHECK(job.cluster.hosts[2].slots == 4);
  CHECK(job.cluster.hosts[3].address == "fe80::2");  // unbracketed IPv6: no slots
  CHECK(job.cluster.hosts[3].slots == 1);
  const std::string at = "--set cluster.hosts=10.0.0.1:2, node-b ,[fe80::1]:4,fe80::2";
  CHECK(job.cluster.hosts[2].pos.str() == at);
  CHECK(job.posOf("cluster.hosts").str() == at);
  CHECK(job.posOf("cluster.hosts[0].slots").str() == at);
  CHECK(job.positions.count("cluster.hosts[1].slots") == 0);  // the file's entry is gone with it

  JobConfig toml_form =
      parseJobString("", "job.toml", {"cluster.hosts=[{address=\"a\", slots=3}, {address=\"b\"}]"});
  CHECK(toml_form.cluster.present);
  REQUIRE(toml_form.cluster.hosts.size() == 2);
  CHECK(toml_form.cluster.hosts[0].address == "a");
  CHECK(toml_form.cluster.hosts[0].slots == 3);
  CHECK(toml_form.cluster.hosts[1].slots == 1);

  JobConfig quoted = parseJobString("", "job.toml", {"cluster.hosts=\"a:2,b:3\""});
  REQUIRE(quoted.cluster.hosts.size() == 2);
  CHECK(quoted.cluster.hosts[1].slots == 3);

  CHECK(parseJobString(file, "job.toml", {"cluster.hosts="}).cluster.hosts.empty());

  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"cluster.hosts=a:2,b:x"}); }) ==
        "--set cluster.hosts=a:2,b:x: [cluster] hosts[1].slots must be an integer (got string \"x\")");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"cluster.hosts=a:"}); }) ==
        "--set cluster.hosts=a:: [cluster] hosts[0].slots must be an integer (got string \"\")");
  CHECK(configErrorOf([] { parseJobString("", "job.toml", {"cluster.hosts=[{address=\"a\", slot=3}]"}); }) ==
        "--set cluster.hosts=[{address=\"a\", slot=3}]: [cluster] hosts[0] unknown key 'slot' (did you mean "
        "'slots'?)");
  CHECK(
      configErrorOf([] { parseJobString("", "job.toml", {"cluster.hosts=3"}); }) ==
      "--set cluster.hosts=3: [cluster] hosts must be an array of tables ([[cluster.hosts]] or [{ address = "
      "\"10.0.0.1\", slots = 2 }, ...]) (got integer 3)");
}

TEST_CASE("a [cluster] of timeouts and recovery alone leaves the job on one host") {
  CHECK_FALSE(
      parseJobString("[cluster]\nelastic = true\nheartbeat_timeout_s = 5\n", "job.toml").cluster.present);
  CHECK_FALSE(parseJobString("", "job.toml", {"cluster.elastic=true", "cluster.collective_timeout_s=60"})
                  .cluster.present);
  // Any key that says where the hosts are, or an empty table, places it on hosts.
  CHECK(parseJobString("[cluster]\nelastic = true\ncoordinator = \"10.0.0.1:29500\"\n", "job.toml")
            .cluster.present);
  CHECK(parseJobString("[cluster]\n", "job.toml").cluster.present);
  CHECK(
      parseJobString("", "job.toml", {"cluster.elastic=true", "cluster.token_file=/run/t"}).cluster.present);
  CHECK(dtrain::isOneHostClusterKey("max_restarts"));
  CHECK_FALSE(dtrain::isOneHostClusterKey("hosts"));
}
