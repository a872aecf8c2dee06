#include "core/util/seconds.h"

#include <sstream>

namespace dtrain {

std::string durationText(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + " ms";
  std::ostringstream out;
  out << static_cast<double>(d.count()) / 1000.0 << " s";
  return out.str();
}

}  // namespace dtrain
