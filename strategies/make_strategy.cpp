#include "strategies/make_strategy.h"

#include <string>
#include <utility>
#include <vector>

#include "core/comm/store.h"
#include "core/errors.h"
#include "core/util/seconds.h"
#include "strategies/central_storage.h"
#include "strategies/mirrored.h"
#include "strategies/one_device.h"
#include "strategies/parameter_server/parameter_server.h"
#include "strategies/parameter_server/shard_process.h"

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
  if (cfg.type == "central_storage") {
    if (!group)
      throw ConfigError(
          "[strategy] type 'central_storage' runs one process per worker; start it with `dtrain train` (not "
          "as a single process)");
    return std::make_shared<CentralStorageStrategy>(std::move(group));
  }
  throw ConfigError("[strategy] type '" + cfg.type +
                    "' is not available in this build yet; use 'one_device'");
}

std::shared_ptr<Strategy> makeStrategy(const JobConfig& job, WorkerSession& session) {
  if (job.strategy.type != "parameter_server") return makeStrategy(job.strategy, session.group());
  std::vector<std::string> endpoints;
  const auto timeout = secondsToMillis(job.cluster.join_timeout_s);
  for (int s = 0; s < job.strategy.ps; ++s) {
    const Bytes b = session.store().get(shardEndpointKey(s), timeout);
    endpoints.emplace_back(b.begin(), b.end());
  }
  return std::make_shared<ParameterServerStrategy>(session.group(), std::move(endpoints),
                                                   session.generation(), job.cluster.collective_timeout_s,
                                                   job.strategy.consistency, &session.store());
}

}  // namespace dtrain
