// A parameter-server shard's process: the host's dtrain starts it like a
// worker; after joining, the last [strategy] ps ranks become shards. It
// publishes where it listens in the run's key-value store and serves the
// workers until the chief stops it.
#pragma once
#include <string>

#include "core/config/job_config.h"
#include "core/launch/worker_session.h"

namespace dtrain {

// The store key under which shard `shard` publishes its endpoint.
std::string shardEndpointKey(int shard);
// The store key under which shard `shard` publishes what the lost worker
// `worker`'s applied pushes covered (DoneSlices::text).
std::string doneSlicesKey(int worker, int shard);

// Serves as shard session.shard(), listening on `host` (over TCP), or, when
// `host` is empty, on an abstract Unix socket (every worker on this host); returns, once the
// chief has stopped it, one line of what it did (ShardServer::summary).
// Throws CommError when the workers fall silent.
std::string runShardProcess(const JobConfig& job, WorkerSession& session, const std::string& host);

}  // namespace dtrain
