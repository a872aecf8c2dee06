#include "core/config/job_config.h"

namespace dtrain {

bool isOneHostClusterKey(const std::string& key) {
  static const char* const kKeys[] = {
      "join_timeout_s", "heartbeat_interval_s", "heartbeat_timeout_s", "collective_timeout_s",
      "elastic",        "max_restarts",         "restart_window_s",    "host_cooldown_s"};
  for (const char* k : kKeys)
    if (key == k) return true;
  return false;
}

SourcePos JobConfig::posOf(const std::string& dotted_key) const {
  auto it = positions.find(dotted_key);
  if (it != positions.end()) return it->second;
  return SourcePos{source_path, 0, 0};
}

}  // namespace dtrain
