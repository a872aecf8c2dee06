// The strategy a job's [strategy] type names, over `group` (the ranks'
// collectives; null for a single process).
#pragma once
#include <memory>

#include "core/comm/process_group.h"
#include "core/config/job_config.h"
#include "core/launch/worker_session.h"
#include "core/train/strategy.h"

namespace dtrain {

// Throws ConfigError for a type this build does not have, or one that needs
// several processes without a group.
std::shared_ptr<Strategy> makeStrategy(const StrategySection& cfg, std::shared_ptr<ProcessGroup> group);
// A worker's strategy in a multi-process run (a parameter server's also finds
// its shards through the session's store).
std::shared_ptr<Strategy> makeStrategy(const JobConfig& job, WorkerSession& session);

}  // namespace dtrain
