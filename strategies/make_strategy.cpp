#include "core/errors.h"
#include "strategies/one_device.h"

namespace dtrain {

std::unique_ptr<Strategy> makeStrategy(const StrategySection& cfg) {
  if (cfg.type == "one_device") return std::make_unique<OneDeviceStrategy>();
  throw ConfigError("[strategy] type '" + cfg.type +
                    "' is not available in this build yet; use 'one_device'");
}

}  // namespace dtrain
