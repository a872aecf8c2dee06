#include "core/backend/cuda/cuda_layers.h"

#include "core/backend/cuda/cuda_add.h"
#include "core/backend/cuda/cuda_batch_norm.h"
#include "core/backend/cuda/cuda_concat.h"
#include "core/backend/cuda/cuda_conv2d.h"
#include "core/backend/cuda/cuda_dense.h"
#include "core/backend/cuda/cuda_dropout.h"
#include "core/backend/cuda/cuda_global_avg_pool.h"
#include "core/backend/cuda/cuda_pool.h"
#include "core/backend/cuda/cuda_relu.h"
#include "core/backend/cuda/cuda_relu6.h"
#include "core/errors.h"
#include "core/nn/layers/flatten.h"

namespace dtrain {

namespace {

// The CPU factory reads and checks the options; the GPU layer takes its configuration.
template <typename Cpu, typename Gpu>
LayerRegistry::Factory onGpu(CudaContext& ctx) {
  return [&ctx](const std::string& name, const LayerOptions& options, const LayerDefaults& defaults) {
    std::unique_ptr<Layer> cpu = Cpu::create(name, options, defaults);
    return std::unique_ptr<Layer>(std::make_unique<Gpu>(static_cast<const Cpu&>(*cpu), ctx));
  };
}

}  // namespace

LayerRegistry cudaLayers(CudaContext& ctx) {
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
  r.add("batch_norm", onGpu<BatchNorm, CudaBatchNorm>(ctx));
  r.add("concat", onGpu<Concat, CudaConcat>(ctx));
  r.add("conv2d", onGpu<Conv2d, CudaConv2d>(ctx));
  r.add("depthwise_conv2d", onGpu<DepthwiseConv2d, CudaConv2d>(ctx));
  r.add("dense", onGpu<Dense, CudaDense>(ctx));
  r.add("dropout", onGpu<Dropout, CudaDropout>(ctx));
  // flatten only copies, and Tensor::copyFrom works on any device (the model
  // usually aliases it away).
  r.add("flatten", Flatten::create);
  r.add("global_avg_pool", onGpu<GlobalAvgPool, CudaGlobalAvgPool>(ctx));
  r.add("max_pool", onGpu<MaxPool, CudaMaxPool>(ctx));
  r.add("relu", onGpu<Relu, CudaRelu>(ctx));
  r.add("relu6", onGpu<Relu6, CudaRelu6>(ctx));
  return r;
}

}  // namespace dtrain
