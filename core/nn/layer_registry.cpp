#include "core/nn/layer_registry.h"

#include "core/config/suggest.h"
#include "core/errors.h"
#include "core/nn/layers/add.h"
#include "core/nn/layers/avg_pool.h"
#include "core/nn/layers/batch_norm.h"
#include "core/nn/layers/causal_self_attention.h"
#include "core/nn/layers/concat.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/depthwise_conv2d.h"
#include "core/nn/layers/dropout.h"
#include "core/nn/layers/embedding.h"
#include "core/nn/layers/flatten.h"
#include "core/nn/layers/gelu.h"
#include "core/nn/layers/global_avg_pool.h"
#include "core/nn/layers/layer_norm.h"
#include "core/nn/layers/max_pool.h"
#include "core/nn/layers/position_embedding.h"
#include "core/nn/layers/relu.h"
#include "core/nn/layers/relu6.h"

namespace dtrain {

std::vector<std::string> LayerRegistry::types() const {
  std::vector<std::string> names;
  for (const auto& entry : factories_) names.push_back(entry.first);  // std::map: sorted
  return names;
}

std::unique_ptr<Layer> LayerRegistry::create(const std::string& type, const std::string& name,
                                             const LayerOptions& options,
                                             const LayerDefaults& defaults) const {
  auto it = factories_.find(type);
  if (it == factories_.end()) {
    const std::vector<std::string> known = types();
    std::string list;
    for (const std::string& t : known) list += (list.empty() ? "" : ", ") + t;
    std::string msg = "unknown layer type '" + type + "' for layer '" + name + "'";
    const std::string hint = closestMatch(type, known);
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    const std::string where = options.pos().str();
    throw ConfigError((where.empty() ? "" : where + ": ") + msg + "; known types: " + list);
  }
  return it->second(name, options, defaults);
}

LayerRegistry builtinLayers() {
  LayerRegistry r;
  r.add("add", Add::create);
  r.add("avg_pool", AvgPool::create);
  r.add("batch_norm", BatchNorm::create);
  r.add("causal_self_attention", CausalSelfAttention::create);
  r.add("concat", Concat::create);
  r.add("conv2d", Conv2d::create);
  r.add("dense", Dense::create);
  r.add("depthwise_conv2d", DepthwiseConv2d::create);
  r.add("dropout", Dropout::create);
  r.add("embedding", Embedding::create);
  r.add("flatten", Flatten::create);
  r.add("gelu", Gelu::create);
  r.add("global_avg_pool", GlobalAvgPool::create);
  r.add("layer_norm", LayerNorm::create);
  r.add("max_pool", MaxPool::create);
  r.add("position_embedding", PositionEmbedding::create);
  r.add("relu", Relu::create);
  r.add("relu6", Relu6::create);
  return r;
}

}  // namespace dtrain
