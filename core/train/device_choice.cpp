#include "core/train/device_choice.h"

#include <cstdio>

#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cuda_module.h"
#include "core/backend/device_ops.h"
#include "core/backend/device_query.h"
#include "core/errors.h"

namespace dtrain {

Device resolveDevice(const std::string& configured, int local_index) {
  if (configured == "cpu") return Device::cpu();
  const bool built = cudaBackendBuilt();
  // Counting GPUs asks the driver only; the backend module is loaded when a
  // GPU will be used, or when "cuda" is asked for, so that a host lacking a
  // CUDA library hears which one before it hears that no GPU is visible.
  if (configured == "auto") {
    const int gpus = built ? visibleCudaDevices() : 0;
    if (gpus == 0) return Device::cpu();
    const Device gpu = Device::cuda(local_index % gpus);
    cudaBackend(gpu);  // a GPU is there: a module that cannot load is an error, never a quiet CPU run
    return gpu;
  }
  if (!built)
    throw ConfigError(
        "[job] device = \"cuda\": this dtrain was built without the CUDA backend (the CUDA toolkit, cuBLAS, "
        "cuDNN or NCCL was missing when it was configured); rebuild with them, or use device = \"cpu\"");
  cudaBackend(Device::cuda(0));  // throws DeviceError naming a missing library
  const int gpus = visibleCudaDevices();
  if (gpus == 0)
    throw ConfigError(
        "[job] device = \"cuda\": no CUDA device is visible to this process (check the driver and "
        "CUDA_VISIBLE_DEVICES); use device = \"cpu\" or \"auto\"");
  return Device::cuda(local_index % gpus);
}

std::string describePrecision(const JobConfig& job) {
  const std::string& p = job.job.precision;
  if (p == "fp32") return "fp32";
  if (p == "tf32") return "tf32 (GPU matrix products and convolutions on tensor cores; fp32 elsewhere)";
  std::string s = p + " (mixed: activations and their gradients in " + p +
                  ", products summed in fp32; on a GPU " + p + " tensors and tensor-core products, on the CPU the "
                  "fp32 kernels on values rounded to " + p +
                  "); weights, their gradients, optimizer state and checkpoints fp32";
  if (p == "fp16") {
    char scaling[160];
    std::snprintf(scaling, sizeof scaling, "; loss scale from %g, x%g after %lld finite steps, x%g on an overflow",
                  job.train.loss_scale_initial, job.train.loss_scale_growth,
                  static_cast<long long>(job.train.loss_scale_growth_interval), job.train.loss_scale_backoff);
    s += scaling;
  }
  return s;
}

void checkCpuBf16(const JobSection& job, Device device) {
  if (!device.isCpu() || job.precision != "bf16" || job.cpu_bf16 != "require") return;
  const cpu::Level level = cpu::activeLevel();
  if (level == cpu::Level::Avx512Bf16) return;
  const bool lowered = cpu::bestLevel(cpu::detectFeatures()) == cpu::Level::Avx512Bf16;
  throw ConfigError(std::string("[job] cpu_bf16 = \"require\": this host's CPU kernels are ") + cpu::levelName(level) +
                    (lowered ? " (lowered by DTRAIN_CPU)" : ", without AVX512-BF16") +
                    "; run on a host whose CPU has AVX512-BF16, or set cpu_bf16 = \"auto\" to take the reference "
                    "path here");
}

std::string describeCpuPrecision(const JobSection& job) {
  if (job.precision != "bf16" && job.precision != "fp16") return "";
  const cpu::Level level = cpu::activeLevel();
  std::string s = job.precision + " on the CPU: ";
  if (job.precision == "fp16")
    return s + "the reference path (fp32 kernels at " + cpu::levelName(level) +
           " on values rounded to fp16; CPUs have no fp16 products worth using)";
  if (level == cpu::Level::Avx512Bf16)
    return s + "the AVX512-BF16 level (fp32 products at 512 bits on bf16-rounded values, which ran faster than "
               "bf16 dot products on the CPUs measured: `dtrain bench cpu` compares them)";
  return s + "the reference path (fp32 kernels at " + cpu::levelName(level) + " on bf16-rounded values; " +
         (cpu::bestLevel(cpu::detectFeatures()) == cpu::Level::Avx512Bf16 ? "AVX512-BF16 turned off by DTRAIN_CPU"
                                                                          : "this CPU has no AVX512-BF16") +
         ")";
}

Device computeDevice(const JobSection& job, int local_index) {
  const Device device = resolveDevice(job.device, local_index);
  if (!device.isCpu()) device_ops::setTf32(device, job.precision == "tf32");
  checkCpuBf16(job, device);
  return device;
}

std::string describeDevice(Device device) {
  if (device.isCpu()) return "cpu";
  const std::string name = cudaDeviceName(device.index);
  return device.str() + (name.empty() ? "" : " (" + name + ")");
}

GpuLayerOptions gpuLayerOptions(const JobSection& job, AlgorithmCache* algorithms) {
  GpuLayerOptions gpu;
  gpu.deterministic = job.deterministic;
  gpu.workspace_limit_bytes = static_cast<size_t>(job.gpu_workspace_mb) << 20;
  gpu.algorithms = algorithms;
  return gpu;
}

}  // namespace dtrain
