// Reading model.layers, the [[model.layers]] tables of an explicit model:
// name, type and inputs, with every other key kept as a layer option for the
// layer's factory to check.
#pragma once
#include <toml++/toml.h>

#include <vector>

#include "core/config/assign_field.h"
#include "core/config/job_config.h"

namespace dtrain {

// Throws ConfigError when the node is not an array of tables, when an entry
// lacks a string name or type, or when an option has a value no layer takes.
std::vector<LayerSpec> parseLayers(const toml::node& node, const ValueOrigin& where);

}  // namespace dtrain
