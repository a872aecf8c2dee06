#include "strategies/parameter_server/shard_process.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/comm/lost_ranks.h"
#include "core/comm/store.h"
#include "core/util/seconds.h"
#include "strategies/parameter_server/shard_server.h"

namespace dtrain {

std::string shardEndpointKey(int shard) { return "parameter_server/shard/" + std::to_string(shard); }

namespace {

// Update `update`'s part of the sum of squares from shard `shard`. One key per
// update and shard: a few bytes each on the coordinator for the run's length.
std::string normKey(int64_t update, int shard) {
  return "parameter_server/norm/" + std::to_string(update) + "/" + std::to_string(shard);
}

}  // namespace

std::string doneSlicesKey(int worker, int shard) {
  return "parameter_server/done/" + std::to_string(worker) + "/" + std::to_string(shard);
}

std::string runShardProcess(const JobConfig& job, WorkerSession& session, const std::string& host) {
  const int workers = session.worldSize() - job.strategy.ps;
  // On one host the workers reach the shard through a Unix socket, which
  // costs less per message than TCP over loopback; in Linux's abstract
  // namespace (the @), so no file is left behind, even by a killed shard.
  const std::string where = !host.empty() ? host
                                          : "ipc://@dtrain-ps-" + std::to_string(::getpid()) + "-shard-" +
                                                std::to_string(session.shard());
  ShardServer server(job, session.shard(), workers, session.generation(), where);
  const std::string& endpoint = server.endpoint();
  Store& store = session.store();
  store.set(shardEndpointKey(session.shard()), Bytes(endpoint.begin(), endpoint.end()));
  // Workers are ranks 0..workers-1, so a lost rank below that is a worker.
  LossWatch watch;
  watch.lost = [&store, workers] {
    std::vector<int> lost;
    for (const LostRank& r : readLostRanks(store))
      if (r.rank < workers) lost.push_back(r.rank);
    return lost;
  };
  const int shard = session.shard();
  watch.publish = [&store, shard](int worker, const DoneSlices& done) {
    const std::string text = done.text();
    store.set(doneSlicesKey(worker, shard), Bytes(text.begin(), text.end()));
  };
  server.watchLosses(std::move(watch));
  // Synchronous clipping over several shards: each publishes its part of the
  // summed gradient's sum of squares for the update and reads the others'
  // (in shard order, so every shard adds the same total).
  const int shards = job.strategy.ps;
  if (shards > 1 && job.strategy.consistency == "sync" && job.train.grad_clip_norm > 0) {
    const auto timeout = secondsToMillis(job.cluster.collective_timeout_s);
    server.exchangeNorms([&store, shard, shards, timeout](int64_t update, double mine) {
      char text[64];
      std::snprintf(text, sizeof text, "%.17g", mine);
      store.set(normKey(update, shard), Bytes(text, text + std::strlen(text)));
      double total = 0;
      for (int s = 0; s < shards; ++s) {
        if (s == shard) {
          total += mine;  // what the others read back: %.17g round-trips a double exactly
          continue;
        }
        const Bytes b = store.get(normKey(update, s), timeout);
        total += std::strtod(std::string(b.begin(), b.end()).c_str(), nullptr);
      }
      return total;
    });
  }
  // Workers that stop talking for longer than a collective may take are gone;
  // a lost one is normally reported sooner by the rendezvous's heartbeats.
  server.serve(job.cluster.collective_timeout_s + job.cluster.heartbeat_timeout_s);
  return server.summary();
}

}  // namespace dtrain
