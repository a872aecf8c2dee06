// Which device a process computes on, from [job] device: "cpu"; "cuda" (the
// GPU of this process's index on its host, wrapping around when there are
// fewer GPUs than processes, which only the Gloo backend allows); "auto"
// (cuda when this build has the backend and a GPU is visible, else cpu).
#pragma once
#include <string>

#include "core/config/job_config.h"
#include "core/nn/gpu_layer_options.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// Throws ConfigError for "cuda" when the build lacks the CUDA backend or no
// GPU is visible, saying which and what to do.
Device resolveDevice(const std::string& configured, int local_index = 0);
// resolveDevice for a job that computes: also sets a GPU's arithmetic to
// [job] precision (TF32 on or off), and holds a CPU to [job] cpu_bf16.
Device computeDevice(const JobSection& job, int local_index = 0);
// [job] cpu_bf16 = "require" with precision "bf16" on a CPU whose kernel
// level lacks AVX512-BF16: throws ConfigError in one line.
void checkCpuBf16(const JobSection& job, Device device);
// How a 16-bit precision computes on this host's CPU, for the start-up line;
// "" for fp32 and tf32.
std::string describeCpuPrecision(const JobSection& job);
// [job] precision in words, for `dtrain check`: what is stored and summed in which format.
std::string describePrecision(const JobConfig& job);
// "cuda:0 (NVIDIA H100 80GB HBM3)", "cpu".
std::string describeDevice(Device device);
// How a GPU's layers choose their algorithms under [job] deterministic and
// gpu_workspace_mb, keeping the choices in `algorithms` (may be null).
GpuLayerOptions gpuLayerOptions(const JobSection& job, AlgorithmCache* algorithms);

}  // namespace dtrain
