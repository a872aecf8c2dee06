#include "core/config/job_to_toml.h"

#include "core/config/cluster_token.h"
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
  std::string operator()(const std::vector<double>* v) const { return formatFloatArray(*v); }
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
  void operator()(const std::vector<double>* v) const {
    toml::array a;
    for (double x : *v) a.push_back(x);
    table.insert(key, std::move(a));
  }
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

void writeHosts(std::string& out, const std::vector<ClusterHost>& hosts) {
  for (const ClusterHost& host : hosts) {
    out += "\n[[cluster.hosts]]\n";
    out += "address = " + quoteString(host.address) + "\n";
    out += "slots = " + std::to_string(host.slots) + "\n";
    if (host.ps >= 0) out += "ps = " + std::to_string(host.ps) + "\n";
  }
}

void writeStages(std::string& out, const std::vector<std::vector<std::string>>& stages) {
  for (const std::vector<std::string>& layers : stages) {
    out += "\n[[strategy.stages]]\nlayers = [";
    for (size_t i = 0; i < layers.size(); ++i) out += (i ? ", " : "") + quoteString(layers[i]);
    out += "]\n";
  }
}

toml::table stageTable(const std::vector<std::string>& layers) {
  toml::array names;
  for (const std::string& name : layers) names.push_back(name);
  toml::table t;
  t.insert("layers", std::move(names));
  return t;
}

toml::table hostTable(const ClusterHost& host) {
  toml::table t;
  t.insert("address", host.address);
  t.insert("slots", static_cast<int64_t>(host.slots));
  if (host.ps >= 0) t.insert("ps", static_cast<int64_t>(host.ps));
  return t;
}

// What the resolved job shows: the job with its inline token replaced, so the
// secret reaches neither checkpoints nor `dtrain check` output.
JobConfig shownJob(const JobConfig& job) {
  JobConfig shown = job;
  if (!shown.cluster.token.empty()) shown.cluster.token = kHiddenToken;
  return shown;
}

// [cluster] in full when the job runs on the hosts it names; a one-host job's
// holds the one-host keys (isOneHostClusterKey) only when one differs from its
// default, so a plain job has none. Of token / token_file only the one in use:
// the text reads back to the same job.
bool oneHostKeysChanged(const JobConfig& job) {
  const JobConfig defaults;
  for (const JobField& f : jobFields())
    if (std::string(f.section) == "cluster" && isOneHostClusterKey(f.key) &&
        std::visit(TextOf{}, f.cref(job)) != std::visit(TextOf{}, f.cref(defaults)))
      return true;
  return false;
}
bool sectionWritten(const JobConfig& job, const std::string& section) {
  return section != "cluster" || job.cluster.present || oneHostKeysChanged(job);
}
bool fieldWritten(const JobConfig& job, const JobField& f) {
  // Named stages are written as [[strategy.stages]] tables, which give the count.
  if (std::string(f.section) == "strategy" && std::string(f.key) == "stages")
    return job.strategy.stage_layers.empty();
  if (std::string(f.section) != "cluster") return true;
  if (!job.cluster.present) return isOneHostClusterKey(f.key);
  if (std::string(f.key) == "token") return !job.cluster.token.empty();
  if (std::string(f.key) == "token_file") return !job.cluster.token_file.empty();
  return true;
}

}  // namespace

std::string jobToToml(const JobConfig& resolved) {
  const JobConfig job = shownJob(resolved);
  std::string out;
  for (const std::string& section : jobSections()) {
    if (!sectionWritten(job, section)) continue;
    out += (out.empty() ? "[" : "\n[") + section + "]\n";
    for (const JobField& f : jobFields())
      if (section == f.section && fieldWritten(job, f))
        out += std::string(f.key) + " = " + std::visit(TextOf{}, f.cref(job)) + "\n";
    // The gpt preset's block count shares the key of a layer list.
    if (section == "model" && job.model.preset == "gpt")
      out += "layers = " + std::to_string(job.model.blocks) + "\n";
    if (section == "model") writeLayers(out, job.model.layers);
    if (section == "strategy") writeStages(out, job.strategy.stage_layers);
    if (section == "cluster") writeHosts(out, job.cluster.hosts);
  }
  return out;
}

toml::table jobToTable(const JobConfig& resolved) {
  const JobConfig job = shownJob(resolved);
  toml::table root;
  for (const std::string& section : jobSections()) {
    if (!sectionWritten(job, section)) continue;
    toml::table t;
    for (const JobField& f : jobFields())
      if (section == f.section && fieldWritten(job, f)) std::visit(Insert{t, f.key}, f.cref(job));
    if (section == "model" && job.model.preset == "gpt") {
      t.insert("layers", job.model.blocks);
    } else if (section == "model") {
      toml::array layers;
      for (const LayerSpec& layer : job.model.layers) layers.push_back(layerTable(layer));
      t.insert("layers", std::move(layers));
    }
    if (section == "strategy" && !job.strategy.stage_layers.empty()) {
      toml::array stages;
      for (const std::vector<std::string>& layers : job.strategy.stage_layers)
        stages.push_back(stageTable(layers));
      t.insert("stages", std::move(stages));
    }
    if (section == "cluster" && job.cluster.present) {
      toml::array hosts;
      for (const ClusterHost& host : job.cluster.hosts) hosts.push_back(hostTable(host));
      t.insert("hosts", std::move(hosts));
    }
    root.insert(section, std::move(t));
  }
  return root;
}

}  // namespace dtrain
