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
#include "strategies/pipeline/pipeline_plan.h"
#include "strategies/pipeline/pipeline_strategy.h"
#include "strategies/sharded/sharded_strategy.h"

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
  if (cfg.type == "sharded") {
    if (!group)
      throw ConfigError(
          "[strategy] type 'sharded' runs one process per worker; start it with `dtrain train` (not as a "
          "single process)");
    return std::make_shared<ShardedStrategy>(cfg.stage, std::move(group));
  }
  if (cfg.type == "pipeline")
    throw ConfigError(
        "[strategy] type 'pipeline' runs one process per stage; start it with `dtrain train` (not as a "
        "single "
        "process)");
  throw ConfigError("[strategy] type '" + cfg.type +
                    "' is not available in this build yet; use 'one_device'");
}

namespace {

// A pipeline's groups beside the session's: with several replicas, this
// stage's copies (its gradients); for the stage-to-stage messages, NCCL
// between GPUs of their own or shared memory (both set up when the strategy
// attaches: shared memory when the replica's stages share a host and the
// collective allows it), else a Gloo group of its stages.
std::shared_ptr<Strategy> makePipeline(const JobConfig& job, WorkerSession& session) {
  const StrategySection& s = job.strategy;
  const int rank = session.group()->rank();
  const int stage = rank % s.stages, replica = rank / s.stages;
  const auto timeout = secondsToMillis(job.cluster.collective_timeout_s);
  const std::string prefix = "pipeline/" + std::to_string(session.generation());
  GlooOptions options;
  options.timeout = timeout;
  options.address = session.address();
  bool one_host = true;
  for (int k = 0; k < s.stages; ++k) one_host = one_host && session.sameNode(rank, replica * s.stages + k);
  std::shared_ptr<ProcessGroup> link, copies;
  const bool gloo_collective = !pipeline::stagesMayShareMemory(s);
  if (gloo_collective) options.algorithm = s.collective;
  // GPU stages whose run's group is NCCL message each other over NCCL (made when the strategy attaches).
  const bool nccl_links = session.group()->deviceNative();
  if (!nccl_links && (gloo_collective || !one_host)) {
    options.prefix = prefix + "/replica/" + std::to_string(replica);
    for (int k = 0; k < s.stages; ++k) options.rank_hosts.push_back(session.hostOf(replica * s.stages + k));
    link = std::make_shared<GlooProcessGroup>(session.store(), stage, s.stages, options);
  }
  if (s.replicas > 1) {
    options.prefix = prefix + "/stage/" + std::to_string(stage);
    options.rank_hosts.clear();
    for (int r = 0; r < s.replicas; ++r) options.rank_hosts.push_back(session.hostOf(r * s.stages + stage));
    copies = std::make_shared<GlooProcessGroup>(session.store(), replica, s.replicas, options);
  }
  return std::make_shared<pipeline::PipelineStrategy>(s, session.group(), std::move(link), std::move(copies),
                                                      &session.store(),
                                                      prefix + "/shm/" + std::to_string(replica), timeout);
}

}  // namespace

std::shared_ptr<Strategy> makeStrategy(const JobConfig& job, WorkerSession& session) {
  if (job.strategy.type == "pipeline") return makePipeline(job, session);
  if (job.cluster.elastic &&
      (job.strategy.type == "mirrored" || job.strategy.type == "multi_worker_mirrored"))
    return std::make_shared<MirroredStrategy>(job.strategy.type, session.group(), /*elastic=*/true);
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
