#include "strategies/parameter_server/shard_process.h"

#include <unistd.h>

#include "core/comm/store.h"
#include "strategies/parameter_server/shard_server.h"

namespace dtrain {

std::string shardEndpointKey(int shard) { return "parameter_server/shard/" + std::to_string(shard); }

std::string runShardProcess(const JobConfig& job, WorkerSession& session, const std::string& host) {
  const int workers = session.worldSize() - job.strategy.ps;
  // On one host the workers reach the shard through a Unix socket, which
  // costs less per message than TCP over loopback; in Linux's abstract
  // namespace (the @), so no file is left behind, even by a killed shard.
  const std::string where = job.cluster.present ? host
                                                : "ipc://@dtrain-ps-" + std::to_string(::getpid()) +
                                                      "-shard-" + std::to_string(session.shard());
  ShardServer server(job, session.shard(), workers, session.generation(), where);
  const std::string& endpoint = server.endpoint();
  session.store().set(shardEndpointKey(session.shard()), Bytes(endpoint.begin(), endpoint.end()));
  // Workers that stop talking for longer than a collective may take are gone;
  // a lost one is normally reported sooner by the rendezvous's heartbeats.
  server.serve(job.cluster.collective_timeout_s + job.cluster.heartbeat_timeout_s);
  return server.summary();
}

}  // namespace dtrain
