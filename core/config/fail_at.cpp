#include "core/config/fail_at.h"

#include "core/errors.h"

namespace dtrain {

std::string posPrefix(const SourcePos& pos) {
  std::string where = pos.str();
  return where.empty() ? "" : where + ": ";
}

void failAt(const SourcePos& pos, const std::string& msg) { throw ConfigError(posPrefix(pos) + msg); }

}  // namespace dtrain
