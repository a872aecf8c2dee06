#include "cli/bench_cpu_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "core/backend/cpu/cpu_level.h"
#include "core/bench/cpu_ceiling.h"

namespace dtrain::cli {

CLI::App* addBenchCpuCommand(CLI::App& app, BenchCpuArgs& args) {
  auto* cpu = app.get_subcommand("bench")->add_subcommand(
      "cpu", "Measure this CPU's ceilings: peak arithmetic per kernel level, and a dense stack's matrix "
             "products alone");
  cpu->add_option("--widths", args.widths, "Dense layer widths, input first (default: the mlp's 784 512 256 10)")
      ->expected(2, 64)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cpu->add_option("--batch", args.batch, "Global batch, split over the threads (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cpu->add_option("--threads", args.threads, "Threads, one per core by default")->check(CLI::Range(0, 1024));
  cpu->add_option("--seconds", args.seconds, "Seconds per figure (default 1)")->check(CLI::Range(0.05, 60.0));
  cpu->add_flag("--json", args.json, "Print one JSON object instead of lines");
  return cpu;
}

int runBenchCpu(const BenchCpuArgs& args) {
  const int threads = args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t rows = std::max<int64_t>(1, args.batch / threads);
  const CpuCeiling c = measureCpuCeiling(denseStepProducts(args.widths, rows), threads, args.seconds);
  // Images per second the products alone allow: `rows` per thread per pass.
  auto images = [&](double step_s) { return step_s > 0 ? static_cast<double>(rows) / step_s : 0.0; };
  auto gflops = [&](double step_s) { return step_s > 0 ? c.step_flops / step_s / 1e9 : 0.0; };
  const std::string level = cpu::describeActiveLevel();
  if (args.json) {
    std::printf("{\"level\": \"%s\", \"threads\": %d, \"rows_per_thread\": %lld, \"fma256_gflops\": %.1f, "
                "\"fma512_gflops\": %.1f, \"dot_bf16_gflops\": %.1f, \"products_avx2_images_per_s\": %.0f, "
                "\"products_avx512_images_per_s\": %.0f, \"products_bf16_images_per_s\": %.0f, "
                "\"products_avx2_gflops\": %.1f, \"products_avx512_gflops\": %.1f, \"products_bf16_gflops\": %.1f}\n",
                cpu::levelName(cpu::activeLevel()), threads, static_cast<long long>(rows), c.fma256, c.fma512,
                c.dot_bf16, images(c.step_avx2_s), images(c.step_avx512_s), images(c.step_bf16_s),
                gflops(c.step_avx2_s), gflops(c.step_avx512_s), gflops(c.step_bf16_s));
    return kExitOk;
  }
  std::printf("CPU kernels: %s; %d threads\n", level.c_str(), threads);
  std::printf("register-resident peak, GFLOP/s: fp32 256-bit FMA %.1f", c.fma256);
  if (c.fma512 > 0) std::printf(", fp32 512-bit FMA %.1f", c.fma512);
  if (c.dot_bf16 > 0) std::printf(", bf16 512-bit dot product %.1f", c.dot_bf16);
  std::printf("\nmatrix products alone, %lld rows per thread (%.2f MFLOP a step per thread):\n",
              static_cast<long long>(rows), c.step_flops / 1e6);
  std::printf("  avx2 fp32 (OpenBLAS)   %10.0f images/s  %7.1f GFLOP/s\n", images(c.step_avx2_s), gflops(c.step_avx2_s));
  if (c.step_avx512_s > 0)
    std::printf("  avx512 fp32 (oneDNN)   %10.0f images/s  %7.1f GFLOP/s\n", images(c.step_avx512_s),
                gflops(c.step_avx512_s));
  if (c.step_bf16_s > 0)
    std::printf("  bf16 (oneDNN, AVX512-BF16) %6.0f images/s  %7.1f GFLOP/s\n", images(c.step_bf16_s),
                gflops(c.step_bf16_s));
  return kExitOk;
}

}  // namespace dtrain::cli
