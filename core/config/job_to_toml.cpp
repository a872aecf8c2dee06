#include "core/config/job_to_toml.h"

#include "core/config/job_schema.h"
#include "core/config/value_text.h"

namespace dtrain {
namespace {

struct TextOf {
  std::string operator()(const int64_t* v) const { return std::to_string(*v); }
  std::string operator()(const int* v) const { return std::to_string(*v); }
  // TOML integers are signed; the seed keeps its bits (assignField reads it back the same way).
  std::string operator()(const uint64_t* v) const { return std::to_string(static_cast<int64_t>(*v)); }
  std::string operator()(const double* v) const { return formatFloat(*v); }
  std::string operator()(const bool* v) const { return *v ? "true" : "false"; }
  std::string operator()(const std::string* v) const { return quoteString(*v); }
  std::string operator()(const std::vector<int64_t>* v) const { return formatIntArray(*v); }
};

toml::array intArray(const std::vector<int64_t>& v) {
  toml::array a;
  for (int64_t x : v) a.push_back(x);
  return a;
}

struct Insert {
  toml::table& table;
  const char* key;
  void operator()(const int64_t* v) const { table.insert(key, *v); }
  void operator()(const int* v) const { table.insert(key, static_cast<int64_t>(*v)); }
  void operator()(const uint64_t* v) const { table.insert(key, static_cast<int64_t>(*v)); }
  void operator()(const double* v) const { table.insert(key, *v); }
  void operator()(const bool* v) const { table.insert(key, *v); }
  void operator()(const std::string* v) const { table.insert(key, *v); }
  void operator()(const std::vector<int64_t>* v) const { table.insert(key, intArray(*v)); }
};

void writeLayers(std::string& out, const std::vector<LayerSpec>& layers) {
  for (const LayerSpec& layer : layers) {
    out += "\n[[model.layers]]\n";
    out += "name = " + quoteString(layer.name) + "\n";
    out += "type = " + quoteString(layer.type) + "\n";
    out += "inputs = [";
    for (size_t i = 0; i < layer.inputs.size(); ++i) out += (i ? ", " : "") + quoteString(layer.inputs[i]);
    out += "]\n";
    for (const auto& [key, entry] : layer.options.entries())
      out += formatKey(key) + " = " + formatValue(entry.value) + "\n";
  }
}

toml::table layerTable(const LayerSpec& layer) {
  toml::table t;
  t.insert("name", layer.name);
  t.insert("type", layer.type);
  toml::array inputs;
  for (const std::string& input : layer.inputs) inputs.push_back(input);
  t.insert("inputs", std::move(inputs));
  for (const auto& [key, entry] : layer.options.entries()) {
    std::visit(
        [&t, &key = key](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            t.insert(key, intArray(v));
          else
            t.insert(key, v);
        },
        entry.value);
  }
  return t;
}

}  // namespace

std::string jobToToml(const JobConfig& job) {
  std::string out;
  for (const std::string& section : jobSections()) {
    out += (out.empty() ? "[" : "\n[") + section + "]\n";
    for (const JobField& f : jobFields())
      if (section == f.section) out += std::string(f.key) + " = " + std::visit(TextOf{}, f.cref(job)) + "\n";
    if (section == "model") writeLayers(out, job.model.layers);
  }
  return out;
}

toml::table jobToTable(const JobConfig& job) {
  toml::table root;
  for (const std::string& section : jobSections()) {
    toml::table t;
    for (const JobField& f : jobFields())
      if (section == f.section) std::visit(Insert{t, f.key}, f.cref(job));
    if (section == "model") {
      toml::array layers;
      for (const LayerSpec& layer : job.model.layers) layers.push_back(layerTable(layer));
      t.insert("layers", std::move(layers));
    }
    root.insert(section, std::move(t));
  }
  return root;
}

}  // namespace dtrain
