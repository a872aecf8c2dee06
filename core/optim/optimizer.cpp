#include "core/optim/optimizer.h"

#include "core/errors.h"
#include "core/optim/adam.h"
#include "core/optim/sgd.h"

namespace dtrain {

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerSection& cfg) {
  if (cfg.type == "sgd") return std::make_unique<Sgd>(cfg);
  if (cfg.type == "adam") return std::make_unique<Adam>(cfg, /*decoupled_weight_decay=*/false);
  if (cfg.type == "adamw") return std::make_unique<Adam>(cfg, /*decoupled_weight_decay=*/true);
  throw ConfigError("unknown optimizer type \"" + cfg.type + "\"; valid types: sgd, adam, adamw");
}

void checkUpdateRange(const std::string& optimizer, int64_t begin, int64_t end, int64_t n) {
  if (begin < 0 || begin > end || end > n)
    throw Error(optimizer + ": update range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is outside the " + std::to_string(n) + " parameters it was initialised for");
}

}  // namespace dtrain
