#include "core/config/job_config.h"

namespace dtrain {

SourcePos JobConfig::posOf(const std::string& dotted_key) const {
  auto it = positions.find(dotted_key);
  if (it != positions.end()) return it->second;
  return SourcePos{source_path, 0, 0};
}

}  // namespace dtrain
