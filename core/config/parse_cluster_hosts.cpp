#include "core/config/parse_cluster_hosts.h"

#include <limits>
#include <optional>

#include "core/config/fail_at.h"
#include "core/config/suggest.h"
#include "core/config/table_entries.h"
#include "core/config/value_text.h"

namespace dtrain {
namespace {

const char* const kEntryExample = "{ address = \"10.0.0.1\", slots = 2 }";

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

ClusterHost readHost(JobConfig& job, const toml::table& table, size_t index, const ValueOrigin& where) {
  ClusterHost host;
  host.pos = where.at(table);
  const std::string entry = "hosts[" + std::to_string(index) + "]";
  const std::string dotted = "cluster." + entry;
  bool has_address = false;
  for (const TableEntry& e : entriesInFileOrder(table)) {
    const toml::node& value = *e.node;
    if (e.key == "address") {
      if (!value.is_string())
        failAt(where.at(value),
               "[cluster] " + entry + ".address must be a string (got " + describeNode(value) + ")");
      host.address = value.as_string()->get();
      has_address = true;
    } else if (e.key == "slots" || e.key == "ps") {
      auto* number = value.as_integer();
      if (!number)
        failAt(where.at(value),
               "[cluster] " + entry + "." + e.key + " must be an integer (got " + describeNode(value) + ")");
      int64_t v = number->get();
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
        failAt(where.at(value), "[cluster] " + entry + "." + e.key + " must be an integer between " +
                                    std::to_string(std::numeric_limits<int>::min()) + " and " +
                                    std::to_string(std::numeric_limits<int>::max()) + " (got " +
                                    describeNode(value) + ")");
      (e.key == "slots" ? host.slots : host.ps) = static_cast<int>(v);
    } else {
      std::string msg = "[cluster] " + entry + " unknown key '" + e.key + "'";
      std::string hint = closestMatch(e.key, {"address", "slots", "ps"});
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      failAt(where.at(e.key_pos), msg);
    }
    job.positions[dotted + "." + e.key] = where.at(value);
  }
  if (!has_address) failAt(host.pos, "[cluster] " + entry + " needs 'address'");
  return host;
}

bool allDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

void readClusterHosts(JobConfig& job, const toml::node& node, const ValueOrigin& where) {
  // The short form (hosts = "10.0.0.1:2,10.0.0.2:2") in a file too, as on --set.
  if (auto* text = node.as_string()) {
    ValueOrigin at_text = where;
    at_text.fixed = where.at(node);  // every entry is reported at the string
    readClusterHosts(job, hostListToArray(text->get()), at_text);
    return;
  }
  auto* array = node.as_array();
  if (!array)
    failAt(where.at(node), std::string("[cluster] hosts must be an array of tables ([[cluster.hosts]] or [") +
                               kEntryExample + ", ...]) (got " + describeNode(node) + ")");
  // A later source (a --set after the file) replaces the list, positions included.
  for (auto it = job.positions.lower_bound("cluster.hosts[");
       it != job.positions.end() && it->first.compare(0, 14, "cluster.hosts[") == 0;)
    it = job.positions.erase(it);
  std::vector<ClusterHost> hosts;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& entry = (*array)[i];
    auto* table = entry.as_table();
    if (!table)
      failAt(where.at(entry), "[cluster] hosts[" + std::to_string(i) + "] must be a table like " +
                                  kEntryExample + " (got " + describeNode(entry) + ")");
    hosts.push_back(readHost(job, *table, i, where));
  }
  job.cluster.hosts = std::move(hosts);
  job.positions["cluster.hosts"] = where.at(node);
}

toml::array hostListToArray(const std::string& text) {
  toml::array hosts;
  if (trim(text).empty()) return hosts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    const std::string item = trim(text.substr(start, comma == std::string::npos ? comma : comma - start));
    std::string address = item;
    std::optional<std::string> slots;
    if (!item.empty() && item[0] == '[') {
      // [fe80::1]:4 or [fe80::1]
      size_t close = item.find(']');
      if (close != std::string::npos) {
        std::string rest = item.substr(close + 1);
        if (rest.empty() || rest[0] == ':') {
          address = item.substr(1, close - 1);
          if (!rest.empty()) slots = rest.substr(1);
        }
      }
    } else {
      // One colon separates the slots; several without brackets are an IPv6 address.
      size_t colon = item.find(':');
      if (colon != std::string::npos && item.find(':', colon + 1) == std::string::npos) {
        address = item.substr(0, colon);
        slots = item.substr(colon + 1);
      }
    }
    toml::table host;
    host.insert("address", address);
    if (slots) {
      // 18 digits always fit an int64; longer ones are reported as text.
      if (allDigits(*slots) && slots->size() <= 18)
        host.insert("slots", static_cast<int64_t>(std::stoll(*slots)));
      else
        host.insert("slots", *slots);
    }
    hosts.push_back(std::move(host));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

}  // namespace dtrain
