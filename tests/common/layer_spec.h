// A [[model.layers]] entry built in code, as the job parser would give it,
// for tests that build models from layer lists.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain::testing {

// `pos` is the entry's position, `options_pos` its options' (empty: none).
inline LayerSpec layerSpec(const std::string& name, const std::string& type, std::vector<std::string> inputs,
                           std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {},
                           const SourcePos& pos = {}, const SourcePos& options_pos = {}) {
  LayerSpec s;
  s.name = name;
  s.type = type;
  s.inputs = std::move(inputs);
  s.pos = pos;
  s.options = LayerOptions(name, type, pos);
  for (const auto& [key, value] : options) s.options.set(key, value, options_pos);
  return s;
}

}  // namespace dtrain::testing
