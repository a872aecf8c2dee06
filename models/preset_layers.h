// Building a preset's layer list: each layer a LayerSpec whose options carry
// the preset's name as their origin, so an error inside a preset points at it.
#pragma once
#include <string>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

class PresetLayers {
 public:
  explicit PresetLayers(std::string preset) : preset_(std::move(preset)) {}

  // Appends a layer reading `inputs` (empty: the layer before it) and returns
  // its options to fill in.
  LayerOptions& add(const std::string& name, const std::string& type, std::vector<std::string> inputs = {}) {
    LayerSpec spec;
    spec.name = name;
    spec.type = type;
    spec.inputs = std::move(inputs);
    spec.pos = origin();
    spec.options = LayerOptions(name, spec.pos);
    specs_.push_back(std::move(spec));
    return specs_.back().options;
  }
  void set(LayerOptions& options, const std::string& key, LayerOptions::Value value) const {
    options.set(key, std::move(value), origin());
  }
  // The name of the last layer added.
  const std::string& last() const { return specs_.back().name; }
  std::vector<LayerSpec> take() { return std::move(specs_); }

 private:
  SourcePos origin() const { return SourcePos{"[model] preset '" + preset_ + "'"}; }

  std::string preset_;
  std::vector<LayerSpec> specs_;
};

}  // namespace dtrain
