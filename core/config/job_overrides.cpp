#include "core/config/job_overrides.h"

#include <algorithm>

#include "core/config/assign_field.h"
#include "core/config/cluster_token.h"
#include "core/config/fail_at.h"
#include "core/config/job_schema.h"
#include "core/config/parse_cluster_hosts.h"

namespace dtrain {
namespace {

const char* const kExpected = "expected section.key=value, like optimizer.lr=0.01";

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// The value under key "v": parsed as TOML when it is exactly one TOML value,
// otherwise the text itself as a string.
toml::table parseValue(const std::string& value) {
  try {
    toml::table parsed = toml::parse(std::string_view("v = " + value));
    if (parsed.size() == 1 && parsed.contains("v")) return parsed;
  } catch (const toml::parse_error&) {
    // Not TOML: a bare word such as adam or /data/fashion.
  }
  toml::table table;
  table.insert("v", value);
  return table;
}

// "lr" alone: the section that has such a key, when there is just one.
std::string sectionHint(const std::string& key) {
  std::string found;
  for (const std::string& section : jobSections()) {
    std::vector<std::string> keys = sectionKeys(section);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) continue;
    if (!found.empty()) return "";
    found = section + "." + key;
  }
  return found.empty() ? "" : " (did you mean " + found + "?)";
}

// A --set of a cluster key that places the job on hosts gives it a
// [cluster], as writing the key in the file would; a timeout or the recovery
// policy alone does not (isOneHostClusterKey).
void markClusterPresent(JobConfig& job, const std::string& key, const SourcePos& pos) {
  if (isOneHostClusterKey(key)) return;
  job.cluster.present = true;
  job.positions.emplace("cluster", pos);
}

}  // namespace

void applyOverride(JobConfig& job, const std::string& override_text) {
  SourcePos pos{"--set " + override_text};
  size_t eq = override_text.find('=');
  if (eq == std::string::npos) failAt(pos, std::string("no '=' in the override; ") + kExpected);
  const std::string key = trim(override_text.substr(0, eq));
  const std::string value = trim(override_text.substr(eq + 1));
  if (key.empty()) failAt(pos, std::string("the key before '=' is empty; ") + kExpected);

  size_t dot = key.find('.');
  if (dot == std::string::npos)
    failAt(pos, "'" + key + "' does not name a section; " + kExpected + sectionHint(key));
  const std::string section = key.substr(0, dot);
  const std::string name = key.substr(dot + 1);
  if (!isSection(section)) failAt(pos, unknownSectionMessage(section));
  if (name.empty()) failAt(pos, "the key after '" + section + ".' is empty; " + kExpected);
  if (section == "model" && name == "layers")
    failAt(pos, "[model] layers cannot be set with --set; write the [[model.layers]] tables in the job file");

  // The secret stays off the screen in any message that names this override.
  if (section == "cluster" && name == "token")
    pos.origin = "--set cluster.token=" + std::string(kHiddenToken);
  if (section == "cluster" && name == "hosts") {
    toml::table parsed = parseValue(value);
    const toml::node& node = *parsed.get("v");
    // The short form 10.0.0.1:2,10.0.0.2:2 arrives as a string; TOML tables as an array.
    if (auto* list = node.as_string())
      readClusterHosts(job, hostListToArray(list->get()), ValueOrigin{"", pos});
    else
      readClusterHosts(job, node, ValueOrigin{"", pos});
    markClusterPresent(job, "hosts", pos);
    return;
  }

  const JobField* field = findField(section, name);
  if (!field) failAt(pos, unknownKeyMessage(section, name));
  toml::table parsed = parseValue(value);
  assignField(job, *field, *parsed.get("v"), ValueOrigin{"", pos});
  if (section == "cluster") markClusterPresent(job, name, pos);
}

}  // namespace dtrain
