// GPU training steps recorded once as CUDA graphs and replayed ([job]
// cuda_graphs): a step of a few hundred kernel and library calls becomes one
// launch, so the host's cost per step stops growing with the model.
//
// What a replay repeats is exactly the recorded work, so everything that
// changes between steps comes from device memory the host rewrites before
// each step: the dropout seed and batch offset and the optimizer's scalars
// (StepScalars), and the batch itself (the stager's buffers). The stager
// alternates between two buffers, so there is one graph per buffer. Every
// step these run, recorded or not, reads its scalars from device memory, so
// replays, the warm-up steps and call-by-call steps compute bit for bit the
// same thing.
//
// Taken: single-process GPU runs, full-sized batches, no profile (dtrain
// bench step times layers one call at a time). A run of several processes
// steps call by call, since its gradient all-reduce is driven by the host
// while backward runs; so does an epoch's short last batch. Each buffer's
// graph is recorded on its third step, after its first has chosen the
// algorithms and sized every buffer. A step the recording refuses (a call
// not allowed while capturing) is run call by call, and so is the rest of
// the run; the reason is said once.
//
// Not thread-safe: the trainer's thread.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/backend/step_graph.h"
#include "core/backend/step_scalars.h"
#include "core/optim/optimizer.h"
#include "core/train/replica_set.h"

namespace dtrain {

class RecordedSteps {
 public:
  // `clip_norm` as [train] grad_clip_norm (0: none); `say` hears the one line
  // about a recording that failed.
  RecordedSteps(ReplicaSet& replicas, Optimizer& optimizer, int64_t batch_size, double clip_norm,
                std::function<void(const std::string&)> say);
  ~RecordedSteps();

  // Whether run() takes this batch (full-sized), else the caller steps call by call.
  bool takes(const Batch& batch) const;
  // Queues update number `step` (1-based) with learning rate `lr` and dropout
  // seed `seed`, as the call-by-call step would: forward, loss, backward,
  // clipping, update, gradients zeroed. The loss sums are left for the
  // caller's snapshot.
  void run(const Batch& batch, double lr, int64_t step, uint64_t seed);

  int64_t recorded() const { return recorded_; }  // graphs recorded
  int64_t replayed() const { return replayed_; }  // steps run by replaying one

 private:
  static constexpr int kBuffers = 2;         // the stager's
  static constexpr int kCallByCallRuns = 2;  // per buffer, before its recording
  // The step's work as the graph records it.
  void queue(const Batch& batch, const BatchStager::Staged& staged, uint64_t seed);

  ReplicaSet& replicas_;
  Optimizer& optimizer_;
  int64_t batch_size_;
  double clip_norm_;
  std::function<void(const std::string&)> say_;
  std::unique_ptr<StepScalarsBuffer> scalars_;
  std::unique_ptr<StepGraph> graphs_[kBuffers];
  int runs_[kBuffers] = {};
  bool refused_ = false;  // a recording failed: call by call from then on
  int64_t recorded_ = 0, replayed_ = 0;
};

}  // namespace dtrain
