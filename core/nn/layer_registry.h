// Creates layers by type name. Not a singleton: builtinLayers() returns a
// registry holding every layer type of this build, and callers pass it along.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config/layer_options.h"
#include "core/nn/layer.h"

namespace dtrain {

// Facts from the [model] table that layer factories may use as defaults.
struct LayerDefaults {
  InitKind weight_init = InitKind::HeNormal;
};

class LayerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Layer>(const std::string& name, const LayerOptions& options,
                                                       const LayerDefaults& defaults)>;
  void add(const std::string& type, Factory factory) { factories_[type] = std::move(factory); }
  bool has(const std::string& type) const { return factories_.count(type) != 0; }
  std::vector<std::string> types() const;
  // Reads the options it knows, then options.finish(); an unknown type throws a
  // ConfigError listing the known types.
  std::unique_ptr<Layer> create(const std::string& type, const std::string& name, const LayerOptions& options,
                                const LayerDefaults& defaults) const;

 private:
  std::map<std::string, Factory> factories_;
};

// dense, conv2d, depthwise_conv2d, batch_norm, max_pool, avg_pool, global_avg_pool, relu, relu6, dropout,
// flatten, add, concat; for sequences embedding, position_embedding,
// layer_norm, gelu, causal_self_attention.
LayerRegistry builtinLayers();

}  // namespace dtrain
