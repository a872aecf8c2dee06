#include "core/config/parse_job.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/config/assign_field.h"
#include "core/config/fail_at.h"
#include "core/config/job_overrides.h"
#include "core/config/job_schema.h"
#include "core/config/parse_cluster_hosts.h"
#include "core/config/parse_layers.h"
#include "core/config/table_entries.h"
#include "core/config/value_text.h"

namespace dtrain {
namespace {

// [[strategy.stages]] layers = ["conv1", ...]: each stage's layers by name;
// the stage count is the number of tables.
void readStageLayers(JobConfig& job, const toml::array& stages, const ValueOrigin& where) {
  const char* example = "[[strategy.stages]] tables, each with layers = [\"conv1\", ...]";
  job.strategy.stage_layers.clear();
  for (size_t i = 0; i < stages.size(); ++i) {
    const toml::node& node = *stages.get(i);
    const std::string entry = "[strategy] stages[" + std::to_string(i) + "]";
    const toml::table* table = node.as_table();
    if (!table)
      failAt(where.at(node), "[strategy] stages must be an integer (the stage count) or " +
                                 std::string(example) + " (got " + describeNode(node) + " in the array)");
    std::vector<std::string> names;
    bool has_layers = false;
    for (const TableEntry& e : entriesInFileOrder(*table)) {
      if (e.key != "layers")
        failAt(where.at(e.key_pos), entry + " unknown key '" + e.key + "'; a stage has only layers = [...]");
      const toml::array* list = e.node->as_array();
      if (!list)
        failAt(where.at(*e.node),
               entry + ".layers must be an array of layer names (got " + describeNode(*e.node) + ")");
      for (const toml::node& name : *list) {
        if (!name.is_string())
          failAt(where.at(name), entry + ".layers must hold layer names (got " + describeNode(name) + ")");
        names.push_back(name.as_string()->get());
      }
      has_layers = true;
    }
    if (!has_layers) failAt(where.at(node), entry + " needs layers = [...], the stage's layer names");
    job.strategy.stage_layers.push_back(std::move(names));
  }
  if (stages.empty())
    failAt(where.at(stages), "[strategy] stages is an empty array; give " + std::string(example));
  job.strategy.stages = static_cast<int>(job.strategy.stage_layers.size());
  job.positions["strategy.stages"] = where.at(stages);
}

void readSection(JobConfig& job, const std::string& section, const toml::table& table,
                 const ValueOrigin& where) {
  for (const TableEntry& e : entriesInFileOrder(table)) {
    if (section == "model" && e.key == "layers" && e.node->is_integer()) {  // gpt's block count
      job.model.blocks = e.node->as_integer()->get();
      job.model.blocks_given = true;
      job.positions["model.layers"] = where.at(*e.node);
      continue;
    }
    if (section == "model" && e.key == "layers") {
      job.model.layers = parseLayers(*e.node, where);
      job.positions["model.layers"] = where.at(*e.node);
      continue;
    }
    if (section == "cluster" && e.key == "hosts") {
      readClusterHosts(job, *e.node, where);
      continue;
    }
    if (section == "strategy" && e.key == "stages" && e.node->is_array()) {
      readStageLayers(job, *e.node->as_array(), where);
      continue;
    }
    const JobField* field = findField(section, e.key);
    if (!field) failAt(where.at(e.key_pos), unknownKeyMessage(section, e.key));
    assignField(job, *field, *e.node, where);
  }
}

// A key written above the first [section] header: say where it belongs.
[[noreturn]] void failOutsideSection(const TableEntry& e, const ValueOrigin& where) {
  std::vector<std::string> homes;
  for (const std::string& section : jobSections()) {
    std::vector<std::string> keys = sectionKeys(section);
    if (std::find(keys.begin(), keys.end(), e.key) != keys.end()) homes.push_back("[" + section + "]");
  }
  std::string msg = "key '" + e.key + "' is outside any section; ";
  if (homes.empty()) {
    msg += "keys go under a section header such as [train]";
  } else {
    msg += "put it under ";
    for (size_t i = 0; i < homes.size(); ++i)
      msg += (i == 0 ? "" : i + 1 == homes.size() ? " or " : ", ") + homes[i];
  }
  failAt(where.at(e.key_pos), msg);
}

// Whether a [cluster] table places the job on hosts (isOneHostClusterKey):
// an empty one does, as a table that only sets timeouts or recovery does not.
bool describesHosts(const toml::table& cluster) {
  if (cluster.empty()) return true;
  for (const auto& [key, value] : cluster)
    if (!isOneHostClusterKey(std::string(key.str()))) return true;
  return false;
}

void readRoot(JobConfig& job, const toml::table& root, const ValueOrigin& where) {
  for (const TableEntry& e : entriesInFileOrder(root)) {
    bool known = isSection(e.key);
    const toml::table* table = e.node->as_table();
    if (!known && !table) failOutsideSection(e, where);
    if (!known) failAt(where.at(*e.node), unknownSectionMessage(e.key));
    if (!table)
      failAt(where.at(*e.node), "[" + e.key + "] must be a table (got " + describeNode(*e.node) + ")");
    job.positions[e.key] = where.at(*table);
    if (e.key == "cluster") job.cluster.present = describesHosts(*table);
    readSection(job, e.key, *table, where);
  }
}

// Applied after the overrides, so `--set job.name=x` also moves the run directory.
void applyDefaults(JobConfig& job, const std::string& origin) {
  if (job.job.name.empty()) {
    job.job.name = std::filesystem::path(origin).stem().string();
    if (job.job.name.empty()) job.job.name = "job";
  }
  if (job.job.run_dir.empty()) job.job.run_dir = "runs/" + job.job.name;
}

}  // namespace

JobConfig parseJobTable(const toml::table& table, const std::string& origin,
                        const std::vector<std::string>& overrides) {
  JobConfig job;
  job.source_path = origin;
  readRoot(job, table, ValueOrigin{origin, std::nullopt});
  for (const std::string& o : overrides) applyOverride(job, o);
  applyDefaults(job, origin);
  return job;
}

JobConfig parseJobString(const std::string& text, const std::string& origin,
                         const std::vector<std::string>& overrides) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(text), std::string_view(origin));
  } catch (const toml::parse_error& e) {
    const toml::source_position& p = e.source().begin;
    failAt(SourcePos{origin, static_cast<int>(p.line), static_cast<int>(p.column)},
           "TOML syntax error: " + std::string(e.description()));
  }
  return parseJobTable(table, origin, overrides);
}

JobConfig parseJobFile(const std::string& path, const std::vector<std::string>& overrides) {
  // Opening a directory succeeds on some systems and then reads nothing.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    failAt(SourcePos{path},
           "cannot read job file (" + std::make_error_code(std::errc::is_a_directory).message() + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) failAt(SourcePos{path}, "cannot read job file (" + std::string(std::strerror(errno)) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) failAt(SourcePos{path}, "cannot read job file (" + std::string(std::strerror(errno)) + ")");
  return parseJobString(text.str(), path, overrides);
}

}  // namespace dtrain
