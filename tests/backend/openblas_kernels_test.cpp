// OpenBLAS computes with AVX2/FMA kernels wherever the CPU has them: an
// OpenBLAS too old for the CPU falls back to SSE3 ones, and the test
// processes and dtrain itself pin Haswell's then (core/backend/cpu/openblas_kernels.h).
#include <doctest/doctest.h>

#include <string>

#include "core/backend/cpu/openblas_kernels.h"
#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

bool cpuHasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

TEST_CASE("a CPU with AVX2 and FMA computes with OpenBLAS kernels that use them, here and in dtrain") {
  CHECK(isPreHaswellCore("Prescott"));
  CHECK(isPreHaswellCore("sandybridge"));
  CHECK_FALSE(isPreHaswellCore("Haswell"));
  CHECK_FALSE(isPreHaswellCore("SkylakeX"));
  CHECK_FALSE(isPreHaswellCore("Zen"));
  if (!cpuHasAvx2Fma()) return;
  INFO("OpenBLAS core: ", openblasCoreName());
  CHECK_FALSE(isPreHaswellCore(openblasCoreName()));
  testing::TempDir dir("openblas_core");
  testing::writeFile(dir / "job.toml", testing::smallJob(dir / "r"));
  const testing::RunResult r = testing::runDtrain({"check", dir / "job.toml"});
  const size_t at = r.output.find("OpenBLAS's ");
  REQUIRE(at != std::string::npos);
  const std::string core = r.output.substr(at + 11, r.output.find(' ', at + 11) - (at + 11));
  CHECK_FALSE(isPreHaswellCore(core.c_str()));
}

}  // namespace
}  // namespace dtrain
