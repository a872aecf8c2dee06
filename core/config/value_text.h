// Text forms of config values, shared by error messages and the TOML writer so
// a value reads the same in "(got ...)" as in the resolved job file.
#pragma once
#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/layer_options.h"

namespace dtrain {

// The shortest decimal form that reads back to the same double, always marked
// as a float for TOML: 0.05, 1e-08, 5.0, inf, nan.
std::string formatFloat(double v);
// A TOML basic string with quotes and escapes: "adam", "a \"b\"".
std::string quoteString(const std::string& s);
// A TOML array of integers: [512, 256].
std::string formatIntArray(const std::vector<int64_t>& v);
std::string formatFloatArray(const std::vector<double>& v);
// A key as TOML needs it: bare when it can be, quoted otherwise.
std::string formatKey(const std::string& key);
// The value in TOML syntax (an option value as it would appear in a job file).
std::string formatValue(const LayerOptions::Value& v);

// What a value is, for "(got ...)": `string "ten"`, `float 1.5`, `array [1, 2]`, `table`.
std::string describeNode(const toml::node& node);
std::string describeValue(const LayerOptions::Value& v);

}  // namespace dtrain
