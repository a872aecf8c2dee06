// The CPU kernel level: chosen from the CPU's features, lowered (never
// raised) by DTRAIN_CPU, and named by --version; pretended CPUs of every kind
// get the level they can run.
#include <doctest/doctest.h>

#include <string>

#include "core/backend/cpu/cpu_level.h"
#include "core/errors.h"
#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

using cpu::Features;
using cpu::Level;

const Features kAvx2Only{true, false, false};
const Features kAvx512NoBf16{true, true, false};
const Features kAvx512Bf16{true, true, true};

TEST_CASE("each pretended CPU gets the best level it runs") {
  CHECK(cpu::chooseLevel(kAvx2Only, nullptr) == Level::Avx2);
  CHECK(cpu::chooseLevel(kAvx512NoBf16, nullptr) == Level::Avx512);
  CHECK(cpu::chooseLevel(kAvx512Bf16, nullptr) == Level::Avx512Bf16);
  CHECK(cpu::chooseLevel(kAvx512Bf16, "") == Level::Avx512Bf16);
  // A CPU without AVX2 has only the baseline this build was made for.
  CHECK(cpu::chooseLevel(Features{}, nullptr) == Level::Avx2);
}

TEST_CASE("DTRAIN_CPU lowers the level to any one below, and names it") {
  CHECK(cpu::chooseLevel(kAvx512Bf16, "avx2") == Level::Avx2);
  CHECK(cpu::chooseLevel(kAvx512Bf16, "avx512") == Level::Avx512);
  CHECK(cpu::chooseLevel(kAvx512Bf16, "avx512_bf16") == Level::Avx512Bf16);
  CHECK(cpu::chooseLevel(kAvx512NoBf16, "avx2") == Level::Avx2);
  for (Level l : {Level::Avx2, Level::Avx512, Level::Avx512Bf16})
    CHECK(cpu::parseLevel(cpu::levelName(l)) == l);
}

TEST_CASE("DTRAIN_CPU cannot raise the level past the CPU, nor name an unknown one") {
  CHECK_THROWS_WITH_AS(cpu::chooseLevel(kAvx512NoBf16, "avx512_bf16"),
                       "DTRAIN_CPU=avx512_bf16: this CPU runs at most avx512; a level can be lowered, not raised",
                       ConfigError);
  CHECK_THROWS_WITH_AS(cpu::chooseLevel(kAvx2Only, "avx512"),
                       "DTRAIN_CPU=avx512: this CPU runs at most avx2; a level can be lowered, not raised",
                       ConfigError);
  CHECK_THROWS_WITH_AS(cpu::chooseLevel(kAvx2Only, "AVX512"),
                       "DTRAIN_CPU=AVX512: not a CPU kernel level; use avx2, avx512 or avx512_bf16, or unset it "
                       "for the best this CPU runs (avx2)",
                       ConfigError);
}

TEST_CASE("--version names the level this host would take, and DTRAIN_CPU's lowering") {
  const std::string best = cpu::levelName(cpu::bestLevel(cpu::detectFeatures()));
  testing::RunResult plain = testing::runDtrain({"--version"}, "DTRAIN_CPU=");
  CHECK(plain.exit_code == 0);
  CHECK(plain.output.find("CPU kernels: " + best + " (") != std::string::npos);
  CHECK(plain.output.find("lowered") == std::string::npos);

  testing::RunResult lowered = testing::runDtrain({"--version"}, "DTRAIN_CPU=avx2");
  CHECK(lowered.exit_code == 0);
  CHECK(lowered.output.find("CPU kernels: avx2 (") != std::string::npos);
  if (best != "avx2") CHECK(lowered.output.find("lowered by DTRAIN_CPU from " + best) != std::string::npos);
}

TEST_CASE("a DTRAIN_CPU that cannot be honoured ends any command in one line") {
  testing::TempDir dir("cpu_level");
  testing::writeFile(dir / "job.toml", testing::smallJob(dir / "r"));
  const testing::RunResult r = testing::runDtrain({"check", dir / "job.toml"}, "DTRAIN_CPU=avx1024");
  CHECK(r.exit_code != 0);
  CHECK(testing::lineCount(r.output) == 1);
  CHECK(r.output.find("DTRAIN_CPU=avx1024: not a CPU kernel level") != std::string::npos);
}

TEST_CASE("bf16 on a CPU path without AVX512-BF16: the reference path, said in one line, or refused with require") {
  testing::TempDir dir("cpu_bf16");
  testing::writeFile(dir / "job.toml", testing::smallJob(dir / "r"));
  // DTRAIN_CPU=avx2 pretends a CPU without AVX-512 on any host.
  const testing::RunResult taken =
      testing::runDtrain({"check", dir / "job.toml", "--set", "job.precision=bf16"}, "DTRAIN_CPU=avx2");
  CHECK(taken.exit_code == 0);
  CHECK(taken.output.find("# bf16 on the CPU: the reference path (fp32 kernels at avx2 on bf16-rounded values; ") !=
        std::string::npos);

  const testing::RunResult refused = testing::runDtrain(
      {"check", dir / "job.toml", "--set", "job.precision=bf16", "--set", "job.cpu_bf16=require"}, "DTRAIN_CPU=avx2");
  CHECK(refused.exit_code != 0);
  CHECK(testing::lineCount(refused.output) == 1);
  CHECK(refused.output.find("[job] cpu_bf16 = \"require\": this host's CPU kernels are avx2") != std::string::npos);
  CHECK(refused.output.find("set cpu_bf16 = \"auto\"") != std::string::npos);

  // fp32 never asks for bf16 kernels, whatever cpu_bf16 says.
  CHECK(testing::runDtrain({"check", dir / "job.toml", "--set", "job.cpu_bf16=require"}, "DTRAIN_CPU=avx2")
            .exit_code == 0);
  if (cpu::bestLevel(cpu::detectFeatures()) == Level::Avx512Bf16) {
    const testing::RunResult native = testing::runDtrain(
        {"check", dir / "job.toml", "--set", "job.precision=bf16", "--set", "job.cpu_bf16=require"}, "DTRAIN_CPU=");
    CHECK(native.exit_code == 0);
    CHECK(native.output.find("# bf16 on the CPU: the AVX512-BF16 level") != std::string::npos);
  }
}

}  // namespace
}  // namespace dtrain
