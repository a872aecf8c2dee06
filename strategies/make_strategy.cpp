#include "strategies/make_strategy.h"

#include <utility>

#include "core/errors.h"
#include "strategies/mirrored.h"
#include "strategies/one_device.h"

namespace dtrain {

std::shared_ptr<Strategy> makeStrategy(const StrategySection& cfg, std::shared_ptr<ProcessGroup> group) {
  if (cfg.type == "one_device") return std::make_shared<OneDeviceStrategy>();
  if (cfg.type == "mirrored" || cfg.type == "multi_worker_mirrored") {
    if (!group)
      throw ConfigError(
          "[strategy] type '" + cfg.type +
          "' runs one process per worker; start it with `dtrain train` (not as a single process)");
    return std::make_shared<MirroredStrategy>(cfg.type, std::move(group));
  }
  throw ConfigError("[strategy] type '" + cfg.type +
                    "' is not available in this build yet; use 'one_device'");
}

}  // namespace dtrain
