// How a run trains across its workers. The trainer's loop (batches, metrics,
// evaluation, checkpoints) knows no strategy by name: it hands each strategy
// the parts it trains with once the model exists (attach), and asks it to run
// each step. The strategy decides where gradients are combined and where the
// update runs; the implementations live whole in strategies/ (one_device,
// mirrored and multi_worker_mirrored, central_storage, parameter_server), made
// by strategies/make_strategy.h.
//
// Every collective is collective: all ranks make the same calls in the same
// order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/gpu_layer_options.h"
#include "core/train/replica_set.h"
#include "core/train/safetensors.h"
#include "core/util/rng.h"
#include "datasets/batch_loader.h"

namespace dtrain {

class LossScaler;
class Optimizer;
class StepProfile;

// A step's figures: the CPU's at once; a GPU's are on their way (their sums
// snapshotted on the device, taken a step later with takeDeviceFigures).
struct StepFigures {
  BatchFigures host;
  bool on_device = false;
  // What the strategy measured of the step, for metrics.jsonl ("staleness_max": 2).
  std::vector<std::pair<std::string, double>> extra{};
  // The strategy has summed `host` over every worker and agreed on a stop
  // itself (a synchronous parameter server's shards do, so that the workers
  // need no collective that a lost worker would break): the loop takes them
  // as they are, and `stop` is the signal some worker was asked to stop by (0: none).
  bool agreed = false;
  int stop = 0;
  // An elastic run: some worker asked to re-form the group after this step
  // (replacements wait to join); agreed like `stop`.
  bool regroup = false;
};

// What one step trains on.
struct StepInput {
  const Batch& batch;  // this worker's slice of the global batch
  double lr;           // scheduled for this update
  int64_t update;      // 1-based count of updates, this one included
  uint64_t seed;       // dropout masks of this step
  int stop = 0;        // a signal this worker was asked to stop by (0: none), for strategies that agree on it
  bool regroup = false;  // an elastic run: this worker asks to re-form the group after the step
};

// The dropout masks' seed of global batch `batch` (0-based over the epochs):
// the same whichever worker computes which slice of it.
inline uint64_t dropoutSeedOf(uint64_t job_seed, int64_t batch) {
  return splitmix64(job_seed ^ splitmix64(static_cast<uint64_t>(batch)));
}

// What a strategy trains with: the trainer owns every part and keeps it
// alive for the strategy's life.
struct TrainingParts {
  const JobConfig* job = nullptr;  // resolved
  Device device;
  ReplicaSet* replicas = nullptr;
  Optimizer* optimizer = nullptr;
  // fp16's loss scale (off in other precisions): the loss gradient is
  // multiplied by it, and the update decides each step's overflow with it.
  LossScaler* loss_scaler = nullptr;
  GpuLayerOptions gpu_layers;                   // how the replica set's GPU layers were made (a GPU run)
  StepProfile* profile = nullptr;               // dtrain bench step; null in training
  std::function<void(const std::string&)> say;  // one line for the log (warnings)
  int64_t updates_done = 0;                     // steps the run has taken (a resume's checkpoint step)
  int64_t* graph_replays = nullptr;             // counts the steps replayed from a CUDA graph (TrainOutcome)
  // A loader of the training data cut as the trainer's is, handing out
  // `shard`'s slice of each global batch, without prefetching (a worker
  // that takes over a lost worker's slices reads them with it).
  std::function<std::unique_ptr<BatchLoader>(Shard shard)> slice_loader;
  int64_t batches_per_epoch = 0;  // global batches in an epoch of the training data
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  // Rank 0 prints, writes metrics and checkpoints.
  bool isChief() const { return rank() == 0; }
  // Which slice of each global batch this worker trains on: its own, one of
  // worldSize(), unless the strategy's workers share slices (a pipeline's
  // stages of one replica all read the replica's).
  virtual Shard dataShard() const { return Shard{rank(), worldSize()}; }
  // Makes every worker hold rank 0's values.
  virtual void broadcastParameters(float* params, int64_t n) = 0;
  // Copies the chief's bytes to every worker (positions, counters).
  virtual void broadcastFromChief(void* data, int64_t bytes) = 0;
  // Sums figures (loss sums, counts) across workers.
  virtual void reduceFigures(double* values, int64_t n) = 0;

  // Once the parts exist and every rank holds the chief's state, before the
  // first step.
  virtual void attach(const TrainingParts& parts) = 0;
  // How the workers combine, for the start-up line: ", 2 ranks, ..." or "".
  virtual std::string describeRun() const { return ""; }
  // One training step: the batch's gradients, their combination across the
  // workers, the update. Every rank runs the same steps.
  virtual StepFigures step(const StepInput& in) = 0;
  // Whether the workers step together (true), so the loop may reduce each
  // step's figures and evaluate and checkpoint collectively; false: each
  // worker goes at its own pace (asynchronous updates), its figures are its
  // own, and the chief alone evaluates and checkpoints.
  virtual bool lockstep() const { return true; }
  // Whether every rank evaluates a share of the test set (figures reduced
  // through the collectives); false: the chief evaluates alone.
  virtual bool evaluatesTogether() const { return lockstep(); }
  // Whether the strategy evaluates each batch itself, across its ranks
  // (every rank calls evaluateBatch with its dataShard() of the batch, the
  // figures summed with reduceFigures); false: the replica set does.
  virtual bool evaluatesBatches() const { return false; }
  virtual BatchFigures evaluateBatch(const Batch& /*batch*/) { return BatchFigures{}; }
  // Whether the trainer's replica set and optimizer (the whole model, which
  // checkpoints read and write) live in host memory rather than on the
  // compute device: the strategy computes on parts of the model of its own.
  virtual bool keepsWholeModelOnHost() const { return false; }
  // Before untrained state (batch norm's running statistics, per worker
  // unless synchronised) is evaluated or saved: every rank gets the values
  // the checkpoint should hold. Collective.
  virtual void agreeOnBuffers(ParamStore& buffers) = 0;
  // The chief, before writing a checkpoint: the parameters and optimizer
  // state, from wherever the strategy keeps them, into `params` and
  // `optimizer` (the chief's copies, which the checkpoint writes).
  virtual void collectState(ParamStore& params, Optimizer& optimizer) {}
  // Whether the optimizer state lives in pieces across the workers (a
  // sharded run): every rank then takes part in a checkpoint, the state
  // streamed from its owners (stateViews), and the chief's optimizer holds
  // none (a resume's chief holds the whole state until attach shares it out).
  virtual bool shardsState() const { return false; }
  // The optimizer state as a checkpoint's tensors ("adam_m.fc1.weight"),
  // each filled piece by piece by a collective (NamedTensorView::fill): the
  // chief writes them, the others take part (takePartInStreamedWrite).
  virtual std::vector<NamedTensorView> stateViews(const ParamStore& /*store*/) { return {}; }
  // Every rank, after its last step and before the run's final evaluation
  // and checkpoint: workers at their own pace wait here until every
  // worker's updates are in; lockstep workers have nothing to wait for.
  virtual void drainUpdates() {}
  // Every rank, once its last step and checkpoint are done: release what the
  // strategy holds elsewhere (a parameter server's shards).
  virtual void finish() {}
};

}  // namespace dtrain
