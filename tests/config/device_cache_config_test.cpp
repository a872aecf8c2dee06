// [data] device_cache_mb: parsed, checked with the position of the value,
// suggested for a misspelling, written into the resolved job, and free to
// change on resume (it says how batches reach a GPU, not what they hold).
#include <doctest/doctest.h>

#include "core/config/job_to_toml.h"
#include "core/config/parse_job.h"
#include "core/config/resume_overrides.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using namespace dtrain;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;

namespace {

std::string validationError(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return configErrorOf([&] { validateJob(parseJobString(kMinimalJob + extra, "job.toml", overrides)); });
}

}  // namespace

TEST_CASE("device_cache_mb: -1 by default (a share of free GPU memory), 0 off, else MiB") {
  CHECK(parseJobString(kMinimalJob, "job.toml").data.device_cache_mb == -1);
  CHECK(parseJobString(std::string(kMinimalJob) + "device_cache_mb = 0\n", "job.toml").data.device_cache_mb ==
        0);
  const JobConfig set = parseJobString(kMinimalJob, "job.toml", {"data.device_cache_mb=512"});
  CHECK(set.data.device_cache_mb == 512);
  CHECK(validationError("device_cache_mb = 0\n") == "(no ConfigError)");
  CHECK(validationError("device_cache_mb = 1048576\n") == "(no ConfigError)");
}

TEST_CASE("device_cache_mb errors name the position, the key and what it may be") {
  CHECK(validationError("device_cache_mb = -2\n") ==
        "job.toml:6:19: [data] device_cache_mb must be -1 (a quarter of the GPU's free memory), 0 (off) or "
        "MiB up to 1048576 (got -2)");
  CHECK(validationError("device_cache_mb = 1048577\n") ==
        "job.toml:6:19: [data] device_cache_mb must be -1 (a quarter of the GPU's free memory), 0 (off) or "
        "MiB up to 1048576 (got 1048577)");
  CHECK(validationError("", {"data.device_cache_mb=-5"}) ==
        "--set data.device_cache_mb=-5: [data] device_cache_mb must be -1 (a quarter of the GPU's free "
        "memory), 0 (off) or MiB up to 1048576 (got -5)");
  CHECK(configErrorOf([] {
          parseJobString(std::string(kMinimalJob) + "device_cache_mb = 1.5\n", "job.toml");
        }) == "job.toml:6:19: [data] device_cache_mb must be an integer (got float 1.5)");
  CHECK(configErrorOf([] {
          parseJobString(std::string(kMinimalJob) + "device_cahce_mb = 5\n", "job.toml");
        }) == "job.toml:6:1: [data] unknown key 'device_cahce_mb' (did you mean 'device_cache_mb'?)");
}

TEST_CASE("device_cache_mb is in the resolved job and may change on resume") {
  const JobConfig job = parseJobString(std::string(kMinimalJob) + "device_cache_mb = 64\n", "job.toml");
  const std::string text = jobToToml(job);
  CHECK(text.find("\ndevice_cache_mb = 64\n") != std::string::npos);
  CHECK(parseJobString(text, "resolved.toml").data.device_cache_mb == 64);
  CHECK(changeableOnResume("data", "device_cache_mb"));
  JobConfig resumed = job;
  applyResumeOverrides(resumed, {"data.device_cache_mb=0"});
  CHECK(resumed.data.device_cache_mb == 0);
}
