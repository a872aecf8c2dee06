// A parameter-server shard: one process holding its share of the parameters
// (the concatenation of its placed ranges) and the optimizer's state for
// them, applying the workers' gradients. It knows no model: the chief's Init
// says how many floats it holds.
//
// [strategy] consistency:
//   sync     update t is applied once, when every worker's push of t has
//            arrived, summing the pushes in worker order (so the sum does
//            not depend on arrival order); then each worker is answered
//            with the new parameters.
//   async    each push is applied as it arrives and answered at once; its
//            staleness (updates applied since the parameters the worker
//            computed on) is measured.
//   bounded  as async, but a worker's answer waits while it is more than
//            `staleness` updates ahead of the slowest worker, so no worker
//            computes on parameters older than the bound.
// A push is identified by (worker, update): a duplicate of a pending push is
// dropped, a push of an update already applied is answered with the current
// parameters (a retry whose answer was lost), so each is applied exactly
// once; a message of another rendezvous generation is refused.
//
// Lost workers: the rendezvous announces a worker it lost and goes on
// without (LossWatch::lost); the shard then refuses its pushes. Async and
// bounded: it leaves the worker out of the slowest clock and publishes what
// its applied pushes covered (slice_handover.h) for the survivors to take
// over the rest. Sync: an update is the sum of every slice of its global
// batch, whoever pushed it, so it waits for the lost worker's slice, which a
// survivor computes and pushes in its place.
//
// A worker on the shard's host hands it memory the two share (Attach,
// shard_memory.h): its whole pushes and sync parts then come through it, and the first
// answer to each goes back through it; an answer to a repeat goes as a
// frame, so the shared parameters are written once per push, while the
// worker waits for them, never while it reads them.
//
// Sync pushes carry the figures of their slice (loss, correct, samples, a
// stop asked for); each answer carries their sums over the update, so the
// workers agree on a step's figures without a collective of their own.
// Not thread-safe: serve() runs on the shard's main thread.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/config/job_config.h"
#include "core/optim/optimizer.h"
#include "strategies/parameter_server/ps_wire.h"
#include "strategies/parameter_server/shard_memory.h"
#include "strategies/parameter_server/slice_handover.h"

namespace dtrain {

// How a shard hears of lost workers and tells the survivors about them.
struct LossWatch {
  std::function<std::vector<int>()> lost;  // the workers lost so far; polled every ~100 ms
  // What the lost `worker`'s pushes applied here covered.
  std::function<void(int worker, const DoneSlices& done)> publish;
};

class ShardServer {
 public:
  // Binds a ROUTER socket on `host` (port chosen by the system), or on
  // `host` itself when it is an ipc:// endpoint (workers on the same host).
  ShardServer(const JobConfig& job, int shard, int workers, uint64_t generation, const std::string& host);
  ~ShardServer();

  // "tcp://host:port", for the workers.
  const std::string& endpoint() const { return endpoint_; }
  void watchLosses(LossWatch watch) { watch_ = std::move(watch); }
  // Synchronous clipping ([train] grad_clip_norm): the global norm of update
  // `update`'s summed gradient is the sum of every shard's part; this adds
  // the other shards' parts to this one's (unset: this shard is the only one).
  using NormExchange = std::function<double(int64_t update, double sum_of_squares)>;
  void exchangeNorms(NormExchange exchange) { exchange_norms_ = std::move(exchange); }
  // Serves until the chief's Stop. Throws CommError when nothing arrives for
  // `idle_timeout_s` (the workers are gone without a word).
  void serve(double idle_timeout_s);

  // What serve() has done, for logs and tests.
  int64_t version() const { return version_; }
  int64_t requests() const { return requests_; }
  int64_t ignored() const { return ignored_; }  // malformed messages dropped
  // One line: updates applied, staleness (max, mean), the largest clock gap answered.
  std::string summary() const;

 private:
  void handle(const ps::Message& m, const std::string& routing);
  void init(const ps::Message& m, const std::string& routing);
  // A worker's shared memory (ps::Kind::Attach).
  void attachMemory(const ps::Message& m, const std::string& routing);
  // The worker's shared memory when it holds this shard's floats, else null.
  ShardMemory* memoryOf(int worker);
  // A push's gradients: its frame, or the worker's shared memory; null
  // (having refused the push) when neither holds the shard's floats.
  const float* pushedGradients(const ps::Message& m, const std::string& routing);
  void push(const ps::Message& m, const std::string& routing);
  // Async: worker w's gradients applied; through its memory, the new
  // parameters are written into it chunk by chunk while in cache.
  void applyAsync(int worker, const float* grads, const StepInfo& info);
  // Sync: part of a worker's push (ps::Kind::PushPart), sent during its backward.
  void pushPart(const ps::Message& m, const std::string& routing);
  // Sync: the figures of a slice pushed in parts (ps::Kind::Figures).
  void sliceFigures(const ps::Message& m, const std::string& routing);
  // Which slice of the global batch a sync message is of: the sender's own,
  // or the lost worker's it computes in its place.
  int sliceOf(const ps::Header& h) const;
  // Sums the pending pushes over [begin, end) into summed_, in worker order.
  void sumRange(int64_t begin, int64_t end);
  // Sums and applies the parts every worker has sent (no clipping).
  void sumReadyParts();
  // Once every worker's push is whole: sums and applies the rest, answers all.
  void applyPending();
  // Answers the waiting workers the consistency lets go on.
  void answerWaiting();
  int64_t slowestClock() const;
  // Polls the watch (at most every 100 ms) and drops the workers newly lost.
  void checkLosses();
  void dropWorker(int worker);
  // `first`: the first answer to the push, which goes through the worker's
  // shared memory when it has some (a repeat's, as a frame).
  void replyParams(const std::string& routing, int worker, int64_t update, int64_t staleness, bool first);
  void refuse(const ps::Header& h, const std::string& routing, const std::string& why);

  const JobConfig& job_;
  int shard_, workers_;
  uint64_t generation_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;

  bool initialized_ = false, stopped_ = false;
  std::vector<float> params_, summed_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t version_ = 0;  // updates applied (the chief's Init sets where it starts)
  std::string consistency_;
  int64_t staleness_bound_;
  bool scale_lr_;
  // Sync: the pushes of update version_ + 1 per slice of the global batch
  // (slice w is worker w's, or a survivor's in place of a lost w), and per
  // worker where to answer. Async: per worker, where to answer.
  std::vector<std::vector<float>> pending_;
  std::vector<bool> arrived_;              // the slice's push is whole (sent whole, or all its parts)
  std::vector<ps::SliceFigures> figures_;  // per slice
  std::vector<bool> figures_in_;
  std::vector<int> pusher_;            // per slice: the worker whose push of it counts
  std::vector<bool> awaiting_;         // per worker: its own slice is pushed, it awaits the update
  ps::SliceFigures answered_figures_;  // the last update's, summed over its slices
  // Sync pushes in parts: the update's parts by offset, and per slice the
  // parts sent and their floats.
  struct Part {
    int64_t len = 0;
    int arrived = 0;  // slices holding it
    bool summed = false;
  };
  std::map<int64_t, Part> parts_;
  std::vector<std::set<int64_t>> parts_seen_;
  std::vector<int64_t> floats_in_;
  std::vector<std::string> reply_to_;
  std::vector<std::unique_ptr<ShardMemory>> memory_;  // per worker: shared with it, or null
  // Per worker: its memory holds the parameters of its push just applied
  // (written chunk by chunk as the update made them), so its answer need not copy them.
  std::vector<bool> answer_written_;
  double pending_lr_ = 0;
  double chief_lr_ = -1;  // async, bounded: the learning rate of the chief's latest push
  int64_t requests_ = 0;
  int64_t ignored_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  std::vector<int64_t> clocks_;        // per worker: its last update applied
  std::vector<bool> waiting_;          // per worker: its answer waits (async, bounded)
  std::vector<int64_t> staleness_of_;  // per worker: its waiting push's staleness
  std::vector<DoneSlices> done_;       // per worker: the slices its applied pushes covered
  std::vector<bool> lost_;             // per worker: dropped from the run
  int live_;                           // workers not lost
  LossWatch watch_;
  NormExchange exchange_norms_;
  // Test hook (DTRAIN_TEST_PS_APPLIED_LOG=PATH): each applied push appended
  // to PATH.shardS as "WORKER BATCH SLICE SECONDS" (the monotonic clock), so
  // tests see every sample used once and benchmarks the rate of updates.
  std::FILE* applied_log_ = nullptr;
  std::chrono::steady_clock::time_point last_watch_{};
  struct Stats {
    int64_t applied = 0, max_staleness = 0, staleness_sum = 0, max_clock_gap = 0;
    void record(int64_t staleness) {
      ++applied;
      max_staleness = std::max(max_staleness, staleness);
      staleness_sum += staleness;
    }
    double meanStaleness() const { return applied > 0 ? static_cast<double>(staleness_sum) / applied : 0.0; }
  } stats_;
};

}  // namespace dtrain
