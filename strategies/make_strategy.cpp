#include "strategies/make_strategy.h"

#include <string>
#include <utility>
#include <vector>

#include "core/comm/gloo_process_group.h"
#include "core/comm/store.h"
#include "core/errors.h"
#include "core/util/seconds.h"
#include "strategies/central_storage.h"
#include "strategies/mirrored.h"
#include "strategies/one_device.h"
#include "strategies/parameter_server/parameter_server.h"
#include "strategies/parameter_server/shard_process.h"
#include "strategies/pipeline/pipeline_strategy.h"

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
  if (cfg.type == "pipeline")
    throw ConfigError(
        "[strategy] type 'pipeline' runs one process per stage; start it with `dtrain train` (not as a single "
        "process)");
  throw ConfigError("[strategy] type '" + cfg.type +
                    "' is not available in this build yet; use 'one_device'");
}

namespace {

// A pipeline's groups beside the session's: this replica's stages (their
// messages) and, with several replicas, this stage's copies (its gradients).
// On one host (the one this build runs pipelines on), over loopback.
std::shared_ptr<Strategy> makePipeline(const JobConfig& job, WorkerSession& session) {
  const StrategySection& s = job.strategy;
  const int rank = session.group()->rank();
  const int stage = rank % s.stages, replica = rank / s.stages;
  GlooOptions options;
  options.timeout = secondsToMillis(job.cluster.collective_timeout_s);
  const std::string generation = std::to_string(session.generation());
  options.prefix = "pipeline/" + generation + "/replica/" + std::to_string(replica);
  auto link = std::make_shared<GlooProcessGroup>(session.store(), stage, s.stages, options);
  std::shared_ptr<ProcessGroup> copies;
  if (s.replicas > 1) {
    options.prefix = "pipeline/" + generation + "/stage/" + std::to_string(stage);
    copies = std::make_shared<GlooProcessGroup>(session.store(), replica, s.replicas, options);
  }
  return std::make_shared<pipeline::PipelineStrategy>(s, session.group(), std::move(link), std::move(copies));
}

}  // namespace

std::shared_ptr<Strategy> makeStrategy(const JobConfig& job, WorkerSession& session) {
  if (job.strategy.type == "pipeline") return makePipeline(job, session);
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
