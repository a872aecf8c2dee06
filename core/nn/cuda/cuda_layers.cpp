#include "core/nn/cuda/cuda_layers.h"

#include <cublasLt.h>
#include <cudnn.h>

#include <type_traits>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/errors.h"
#include "core/nn/cuda/cuda_add.h"
#include "core/nn/cuda/cuda_batch_norm.h"
#include "core/nn/cuda/cuda_concat.h"
#include "core/nn/cuda/cuda_conv2d.h"
#include "core/nn/cuda/cuda_dense.h"
#include "core/nn/cuda/cuda_dropout.h"
#include "core/nn/cuda/cuda_global_avg_pool.h"
#include "core/nn/cuda/cuda_pool.h"
#include "core/nn/cuda/cuda_relu.h"
#include "core/nn/cuda/cuda_relu6.h"
#include "core/nn/cuda/cuda_sequence_layers.h"
#include "core/nn/layers/flatten.h"

namespace dtrain {

namespace {

// The CPU factory reads and checks the options; the GPU layer takes its
// configuration, and the layers choosing library algorithms take `gpu` too.
template <typename Cpu, typename Gpu>
LayerRegistry::Factory onGpu(CudaContext& ctx, const GpuLayerOptions& gpu = {}) {
  return [&ctx, gpu](const std::string& name, const LayerOptions& options, const LayerDefaults& defaults) {
    std::unique_ptr<Layer> cpu = Cpu::create(name, options, defaults);
    if constexpr (std::is_constructible_v<Gpu, const Cpu&, CudaContext&, const GpuLayerOptions&>)
      return std::unique_ptr<Layer>(std::make_unique<Gpu>(static_cast<const Cpu&>(*cpu), ctx, gpu));
    else
      return std::unique_ptr<Layer>(std::make_unique<Gpu>(static_cast<const Cpu&>(*cpu), ctx));
  };
}

// What the timed algorithm choices hold for: this GPU model and these library versions.
AlgorithmSource algorithmSource(const CudaContext& ctx) {
  cudaDeviceProp props{};
  checkCuda(cudaGetDeviceProperties(&props, ctx.device()), "read the device's properties");
  return AlgorithmSource{props.name, static_cast<int64_t>(cudnnGetVersion()),
                         static_cast<int64_t>(cublasLtGetVersion())};
}

}  // namespace

LayerRegistry cudaLayers(CudaContext& ctx, const GpuLayerOptions& gpu) {
  if (gpu.algorithms) gpu.algorithms->open(algorithmSource(ctx));
  LayerRegistry r;
  for (const std::string& type : builtinLayers().types()) {
    r.add(type, [type](const std::string& name, const LayerOptions& options, const LayerDefaults&) {
      const std::string where = options.pos().str();
      throw ConfigError((where.empty() ? "" : where + ": ") + "layer '" + name + "': type '" + type +
                        "' has no CUDA implementation yet; use device = \"cpu\"");
      return std::unique_ptr<Layer>();
    });
  }
  r.add("add", onGpu<Add, CudaAdd>(ctx));
  r.add("avg_pool", onGpu<AvgPool, CudaAvgPool>(ctx));
  r.add("batch_norm", onGpu<BatchNorm, CudaBatchNorm>(ctx, gpu));
  r.add("causal_self_attention", onGpu<CausalSelfAttention, CudaCausalSelfAttention>(ctx));
  r.add("concat", onGpu<Concat, CudaConcat>(ctx));
  r.add("conv2d", onGpu<Conv2d, CudaConv2d>(ctx, gpu));
  r.add("depthwise_conv2d", onGpu<DepthwiseConv2d, CudaConv2d>(ctx, gpu));
  r.add("dense", onGpu<Dense, CudaDense>(ctx, gpu));
  r.add("dropout", onGpu<Dropout, CudaDropout>(ctx));
  r.add("embedding", onGpu<Embedding, CudaEmbedding>(ctx));
  r.add("gelu", onGpu<Gelu, CudaGelu>(ctx));
  // flatten only copies, and Tensor::copyFrom works on any device (the model
  // usually aliases it away).
  r.add("flatten", Flatten::create);
  r.add("global_avg_pool", onGpu<GlobalAvgPool, CudaGlobalAvgPool>(ctx));
  r.add("layer_norm", onGpu<LayerNorm, CudaLayerNorm>(ctx));
  r.add("max_pool", onGpu<MaxPool, CudaMaxPool>(ctx));
  r.add("position_embedding", onGpu<PositionEmbedding, CudaPositionEmbedding>(ctx));
  r.add("relu", onGpu<Relu, CudaRelu>(ctx));
  r.add("relu6", onGpu<Relu6, CudaRelu6>(ctx));
  return r;
}

}  // namespace dtrain

// The module's entry point for core/nn/device_layers.cpp (kCudaLayersEntry).
extern "C" void dtrain_cuda_layers_v2(int device, const dtrain::GpuLayerOptions* options,
                                      dtrain::LayerRegistry* out) {
  *out = dtrain::cudaLayers(dtrain::CudaContext::of(device), options ? *options : dtrain::GpuLayerOptions{});
}
