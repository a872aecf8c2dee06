// A worker's connections to the parameter-server shards (a DEALER socket per
// shard) and the requests it makes of them: the chief's Init and Gather, and
// every worker's synchronous push of its gradients with the answer of the
// updated parameters. The flat parameter and gradient buffers are cut by the
// placement: shard s gets the concatenation of its ranges, in flat order.
// Every wait has a deadline ([cluster] collective_timeout_s); a shard that
// misses it, or answers with a failure, is named in a CommError. A push
// whose answer does not come is sent again (the shard applies it once).
// A shard on this worker's host (an ipc:// endpoint) is handed memory the
// two share (shard_memory.h): this worker's own whole pushes and their
// answers and its sync parts pass through it; repeats and pushes in a lost
// worker's place still go as frames.
//
// Not thread-safe: the trainer's thread.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "strategies/parameter_server/placement.h"
#include "strategies/parameter_server/ps_wire.h"
#include "strategies/parameter_server/shard_memory.h"

namespace dtrain {

class ShardClients {
 public:
  ShardClients(const std::vector<std::string>& endpoints, const ShardPlacement& placement, int worker,
               uint64_t generation, double timeout_s);
  ~ShardClients();

  // The chief: hands each shard its parameters and optimizer state (flat
  // host buffers, the state buffers in the optimizer's order), the weight
  // decay's flags (DecayMask::flags of the whole layout) and the number of
  // updates done; waits for every shard's answer.
  void init(const float* params, const std::vector<const float*>& state, const float* decay_flags,
            int64_t updates_done);
  // Sends update `update`'s gradients (flat, host) whole to every shard,
  // without waiting for the answer. They are of worker `of_worker`'s slice
  // of global batch `batch` (-1: not said), which the shards note for a
  // handover: this worker's own, or in a synchronous run a lost worker's
  // slice it computes in its place (kept here for a resend until the answer).
  // `figures`: the slice's (sync).
  void push(int64_t update, double lr, const float* grads, int64_t batch, int of_worker,
            const ps::SliceFigures& figures = {});
  // Synchronous pushes in parts, sent while backward runs: the flat range
  // [begin, end) of update `update`'s gradients (grads is the flat buffer),
  // cut by the placement; then, once every part is sent, finishParts sends
  // the slice's figures and keeps `grads` to send whole if no answer comes.
  void pushPart(int64_t update, double lr, const float* grads, int64_t begin, int64_t end);
  void finishParts(int64_t update, double lr, const float* grads, const ps::SliceFigures& figures);
  // Copies this worker's own push, whose gradients are about to be
  // overwritten (by a lost worker's slice computed in the same buffer).
  void keepOwnPush();
  // Every shard's answer to this worker's pushes of `update`, into `params`
  // (flat, host), once all have come: the parameters stay as they were
  // while any is awaited. `while_waiting` is called every ~200 ms meanwhile
  // (it may push more); when it says it did something, the deadline starts again.
  void pull(int64_t update, double lr, float* params, const std::function<bool()>& while_waiting = {});
  // push and pull, for this worker's own slice.
  void pushAndPull(int64_t update, double lr, const float* grads, float* params, int64_t batch = -1,
                   int of_worker = -1);
  // The same, leaving `grads` zero: a slice copied into shared memory is
  // cleared as it is copied, while in cache; the rest once the answers came.
  void pushAndPullClearing(int64_t update, double lr, float* grads, float* params, int64_t batch = -1,
                           int of_worker = -1);
  // Sync: the figures of the last update pulled, summed over its slices.
  const ps::SliceFigures& answeredFigures() const { return answered_figures_; }
  // The chief: every shard's parameters and optimizer state into the flat buffers.
  void gather(float* params, const std::vector<float*>& state);
  // The chief: the run is over; each shard answers and exits.
  void stop();

  int shards() const { return static_cast<int>(sockets_.size()); }
  // Shards reached through shared memory (on this worker's host).
  int sharedShards() const;
  // Every worker starts from the chief's state, version `updates_done` on every shard.
  void startAt(int64_t updates_done) { versions_.assign(versions_.size(), updates_done); }
  // The largest staleness the shards reported for this worker's pushes.
  int64_t maxStaleness() const { return max_staleness_; }
  // Pushes sent again because no answer came in time.
  int64_t resends() const { return resends_; }
  // The fewest workers not lost that any shard's answer reported (it starts
  // at `workers`): when it drops, the rendezvous has announced a loss.
  int liveWorkers() const { return live_; }
  void startLive(int workers) { live_ = workers; }
  // The last pushAndPull as each shard saw it: the push's staleness and the
  // shard's requests per second; and the bytes that went each way per shard.
  struct ShardStep {
    int64_t staleness = 0;
    double requests_per_s = 0;
    int64_t bytes = 0;
  };
  const std::vector<ShardStep>& lastStep() const { return last_step_; }

 private:
  // Hands shard s (on this host) memory the two share; on any failure the
  // shard is spoken to through frames, as one on another host.
  void attachMemory(int shard);
  // The shard's slice of a flat buffer, gathered into scratch_[s].
  const float* slice(int shard, const float* flat);
  // Streams the shard's slice of `flat` into its shared memory, and returns
  // it there; `clearing` (the same buffer, or null) is zeroed behind, in cache.
  float* streamOut(int shard, const float* flat, float* clearing);
  // What push does, with `clearing`: own slices sent through shared memory
  // are streamed out and cleared (the caller's buffer is then not const).
  void pushSlices(int64_t update, double lr, const float* grads, int64_t batch, int of_worker,
                  const ps::SliceFigures& figures, float* clearing);
  // Writes the shard's slice back into a flat buffer.
  void unslice(int shard, const float* from, float* flat) const;
  // Waits for shard s's answer of `kind`; throws CommError on a failure,
  // another kind or the deadline.
  ps::Message await(int shard, ps::Kind kind, const std::string& what);
  // The same within `wait_ms`, or nothing.
  std::optional<ps::Message> tryAwait(int shard, ps::Kind kind, const std::string& what, int wait_ms);
  // The answer to this worker's push of `update`, pushing again while it does not come.
  ps::Message awaitParams(int shard, int64_t update, double lr, const std::string& what,
                          const std::function<bool()>& while_waiting);
  // Sends the pushes of `update` to shard s again: this worker's own and those in lost workers' places.
  void resend(int shard, int64_t update, double lr);
  ps::Header header(ps::Kind kind, int shard, int64_t update, double lr = 0) const;
  // A whole push's: the slice of global batch `batch` it is of, and its figures.
  ps::Header pushHeader(int shard, int64_t update, double lr, int64_t batch, int slice,
                        const ps::SliceFigures& figures) const;

  ShardPlacement placement_;
  std::vector<std::vector<PlacedRange>> ranges_;  // per shard
  int worker_;
  uint64_t generation_;
  int timeout_ms_;
  zmq::context_t context_;
  std::vector<zmq::socket_t> sockets_;
  std::vector<std::string> endpoints_;
  std::vector<std::vector<float>> scratch_;           // per shard
  std::vector<std::unique_ptr<ShardMemory>> memory_;  // per shard: shared with it, or null
  std::vector<int64_t> versions_;                     // per shard: the version of the parameters last taken
  // This worker's own push under way: per shard its slice (in the caller's
  // buffer or scratch_, or own_copy_ once kept), what it covers, its figures.
  std::vector<const float*> pushed_;
  std::vector<std::vector<float>> own_copy_;
  int64_t push_batch_ = -1;
  int push_slice_ = -1;
  ps::SliceFigures push_figures_;
  // Slices of lost workers pushed in their places for the update under way.
  struct PushInPlace {
    int64_t batch;
    int slice;
    ps::SliceFigures figures;
    std::vector<std::vector<float>> per_shard;
  };
  std::vector<PushInPlace> in_place_;
  ps::SliceFigures answered_figures_;
  int64_t max_staleness_ = 0;
  int64_t resends_ = 0;
  int live_ = 1 << 30;
  std::vector<ShardStep> last_step_;  // per shard
  // A push unanswered this long is sent again, then after twice as long, up to the last.
  static constexpr int kFirstResendMs = 250;
  static constexpr int kLastResendMs = 4000;
  static constexpr int kWaitingCallMs = 200;
};

}  // namespace dtrain
