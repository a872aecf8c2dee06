// The [cluster] token: read from the job or a file, and kept out of the
// resolved job that checkpoints and `dtrain check` print.
#include "core/config/cluster_token.h"

#include <doctest/doctest.h>

#include <sstream>

#include "core/config/job_to_toml.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::ClusterSection;
using dtrain::JobConfig;
using dtrain::jobToTable;
using dtrain::jobToToml;
using dtrain::parseJobString;
using dtrain::parseJobTable;
using dtrain::readClusterToken;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;
using dtrain::test::TempDir;

namespace {

const char* const kClusterJob =
    "[model]\npreset = \"mlp\"\n[data]\ndataset = \"synthetic\"\n"
    "[strategy]\ntype = \"multi_worker_mirrored\"\nworkers = 3\ncollective = \"ring\"\nbucket_mb = 25\n"
    "[cluster]\n"
    "coordinator = \"10.0.0.1:29500\"\n"
    "token = \"s3cret-value\"\n"
    "heartbeat_timeout_s = 30\n"
    "hosts = [{ address = \"10.0.0.1\", slots = 2 }, { address = \"node-b\" }]\n";

}  // namespace

TEST_CASE("the resolved job writes [strategy] and [cluster] with the token hidden") {
  JobConfig job = parseJobString(kClusterJob, "job.toml");
  std::string text = jobToToml(job);
  const std::string tail =
      "[strategy]\n"
      "type = \"multi_worker_mirrored\"\n"
      "workers = 3\n"
      "ps = 1\n"
      "consistency = \"sync\"\n"
      "staleness = 2\n"
      "scale_lr_by_staleness = false\n"
      "min_workers = 1\n"
      "gradient_push = \"auto\"\n"
      "collective = \"ring\"\n"
      "bucket_mb = 25.0\n"
      "backend = \"auto\"\n"
      "sync_batchnorm = false\n"
      "stage = 2\n"
      "stages = 2\n"
      "micro_batches = 4\n"
      "schedule = \"1f1b\"\n"
      "replicas = 1\n"
      "stage_memory_mb = 0.0\n"
      "split_by = \"time\"\n"
      "rebalance_after_steps = 3\n"
      "\n"
      "[cluster]\n"
      "from = \"\"\n"
      "coordinator = \"10.0.0.1:29500\"\n"
      "token = \"<hidden>\"\n"
      "join_timeout_s = 300.0\n"
      "heartbeat_interval_s = 1.0\n"
      "heartbeat_timeout_s = 30.0\n"
      "collective_timeout_s = 300.0\n"
      "elastic = false\n"
      "max_restarts = 3\n"
      "restart_window_s = 600.0\n"
      "host_cooldown_s = 60.0\n"
      "\n"
      "[[cluster.hosts]]\n"
      "address = \"10.0.0.1\"\n"
      "slots = 2\n"
      "\n"
      "[[cluster.hosts]]\n"
      "address = \"node-b\"\n"
      "slots = 1\n";
  REQUIRE(text.size() > tail.size());
  CHECK(text.substr(text.size() - tail.size()) == tail);
  CHECK(text.find("s3cret") == std::string::npos);
  CHECK(job.cluster.token == "s3cret-value");  // the job itself keeps it

  std::ostringstream table_text;
  table_text << jobToTable(job);
  CHECK(table_text.str().find("s3cret") == std::string::npos);
  CHECK(table_text.str().find("token = '<hidden>'") != std::string::npos);
}

TEST_CASE("a resolved job with a hidden token reads back, validates, and asks for the token") {
  JobConfig job = parseJobString(kClusterJob, "job.toml");
  JobConfig back = parseJobString(jobToToml(job), "state.toml");
  CHECK(back.cluster.present);
  CHECK(back.cluster.token == dtrain::kHiddenToken);
  CHECK(back.cluster.coordinator == job.cluster.coordinator);
  REQUIRE(back.cluster.hosts.size() == 2);
  CHECK(back.cluster.hosts[1].address == "node-b");
  CHECK(back.strategy.bucket_mb == 25.0);
  CHECK_NOTHROW(dtrain::validateJob(back));
  CHECK(configErrorOf([&] { readClusterToken(back.cluster); }) ==
        "[cluster] token is \"<hidden>\": the secret is not stored with a resolved job; give it again with "
        "--set cluster.token=..., or keep it in a token_file");
  // A resume that passes the token again.
  JobConfig given = parseJobTable(jobToTable(job), "state.toml", {"cluster.token=s3cret-value"});
  CHECK(readClusterToken(given.cluster) == "s3cret-value");
}

TEST_CASE("a token_file job round-trips exactly, and a one-device job has no [cluster]") {
  TempDir dir;
  std::string file = dir.write("token", "from-file\n");
  JobConfig job = parseJobString(kMinimalJob, "job.toml",
                                 {"strategy.type=multi_worker_mirrored", "cluster.coordinator=[::1]:9",
                                  "cluster.token_file=" + file, "cluster.hosts=a:2,b:3"});
  std::string text = jobToToml(job);
  CHECK(text.find("\ntoken_file = \"" + file + "\"\n") != std::string::npos);
  CHECK(text.find("\ntoken = ") == std::string::npos);
  JobConfig back = parseJobString(text, "state.toml");
  CHECK(back.cluster.token_file == file);
  CHECK(back.cluster.token == "");
  CHECK(jobToToml(back) == text);
  CHECK_NOTHROW(dtrain::validateJob(back));
  CHECK(readClusterToken(back.cluster) == "from-file");

  JobConfig single = parseJobString(kMinimalJob, "job.toml");
  CHECK(jobToToml(single).find("cluster") == std::string::npos);
  CHECK_FALSE(jobToTable(single).contains("cluster"));
  CHECK_FALSE(parseJobString(jobToToml(single), "state.toml").cluster.present);
}

TEST_CASE("readClusterToken reads the token or the first line of token_file, trimmed") {
  ClusterSection inline_token;
  inline_token.token = "  abc \t";
  CHECK(readClusterToken(inline_token) == "abc");

  TempDir dir;
  ClusterSection from_file;
  from_file.token_file = dir.write("token", "  tok-123 \r\nsecond line\n");
  CHECK(readClusterToken(from_file) == "tok-123");
  from_file.token_file = dir.write("no-newline", "xyz");
  CHECK(readClusterToken(from_file) == "xyz");
}

TEST_CASE("readClusterToken names the file it cannot use") {
  TempDir dir;
  ClusterSection c;
  c.token_file = dir.write("empty", "");
  CHECK(configErrorOf([&] { readClusterToken(c); }) ==
        "[cluster] token_file '" + c.token_file + "' is empty; its first line must hold the token");
  c.token_file = dir.write("blank-first", " \nsecret\n");
  CHECK(configErrorOf([&] { readClusterToken(c); }) ==
        "[cluster] token_file '" + c.token_file + "' is empty; its first line must hold the token");
  c.token_file = dir.file("missing");
  CHECK(configErrorOf([&] { readClusterToken(c); }) ==
        "[cluster] token_file '" + c.token_file + "' cannot be read (No such file or directory)");
  c.token_file = dir.path();
  CHECK(configErrorOf([&] { readClusterToken(c); }) ==
        "[cluster] token_file '" + dir.path() + "' is a directory, not a file");

  ClusterSection neither;
  CHECK(configErrorOf([&] { readClusterToken(neither); }) == "[cluster] needs token or token_file");
  ClusterSection both;
  both.token = "a";
  both.token_file = "/x";
  CHECK(configErrorOf([&] { readClusterToken(both); }) ==
        "[cluster] token and token_file are both given; use one or the other");
  ClusterSection blank;
  blank.token = "   ";
  CHECK(configErrorOf([&] { readClusterToken(blank); }) == "[cluster] token is empty");
}
