// The pieces of a training step every strategy runs in its own process: the
// gradients of this worker's slice of the batch on its replicas, and the
// update of the parameters from gradients that are complete (summed over the
// replicas and, where the strategy combines them, over the workers), with
// gradient clipping. On a GPU everything is queued and the loss sums are
// snapshotted to be read a step later; a one-process GPU run may have its
// steps recorded as CUDA graphs (RecordedSteps).
//
// Not thread-safe: the trainer's thread, which the pieces may fan out to the
// replicas' compute threads.
#pragma once
#include <memory>
#include <optional>

#include "core/train/recorded_steps.h"
#include "core/train/strategy.h"

namespace dtrain {

// Whether the run scales its loss (fp16: parts.loss_scaler on).
bool lossScaled(const TrainingParts& parts);
// The factor of the loss gradient of update `in.update`: 1 / (global batch)
// times the loss scale (fp16).
float gradientScale(const TrainingParts& parts, const StepInput& in);
// fp16 (parts.loss_scaler on): the step's overflow decided from `finite`
// (the complete gradients' check, the same on every worker) and a skipped
// step logged; adds the scale and the steps skipped to `out`'s figures for
// metrics.jsonl. Returns whether the update goes ahead (always when off).
bool settleLossScale(const TrainingParts& parts, const StepInput& in, bool finite, StepFigures& out);
// From the sum of squares of a step's complete gradients (as every worker
// sees it): the factor the update multiplies them by, 1 / the loss scale
// times the clipping factor ([train] grad_clip_norm); none when fp16's
// overflow check skips the step (settleLossScale). The sum is needed only
// when the loss is scaled or the gradients clipped.
std::optional<float> updateFactor(const TrainingParts& parts, const StepInput& in, double squares,
                                  StepFigures& out);

class LocalStep {
 public:
  // How a GPU step's figures reach the host.
  enum class DeviceFigures {
    // Snapshotted at the update and read a step later: the host never waits.
    ReadLater,
    // Read before the update (readFigures), waiting for the device: an
    // elastic step agrees on them before it changes the parameters.
    ReadBeforeUpdate,
  };
  // `record_graphs`: a one-process GPU run whose strategy lets the whole step
  // be recorded ([job] cuda_graphs decides whether it is).
  LocalStep(const TrainingParts& parts, bool record_graphs,
            DeviceFigures device_figures = DeviceFigures::ReadLater);
  ~LocalStep();

  const TrainingParts& parts() const { return parts_; }
  // ", steps replayed as CUDA graphs" when they are, for the start-up line.
  std::string describe() const;
  bool onDevice() const { return !parts_.device.isCpu(); }

  // The whole step of a process that combines with nobody: a recorded step
  // where one is taken, else gradients, update, and on a GPU the snapshot.
  StepFigures runAlone(const StepInput& in);
  // Forward and backward: each replica adds its slice's gradient to its
  // buffer; `listener` (nullable) hears each layer finish. On a GPU the work
  // is queued and the figures are zero.
  BatchFigures computeGradients(const StepInput& in, BackwardListener* listener);
  // CPU: adds the replicas' gradients into replica 0's (on the compute
  // threads); a GPU has one replica.
  void sumReplicas();
  // The step's figures on the host: `queued` itself on the CPU; on a GPU
  // (DeviceFigures::ReadBeforeUpdate) the sums of what was queued since the
  // last read, waiting for the device to get there.
  BatchFigures readFigures(const BatchFigures& queued);
  // From replica 0's complete gradients: clipping ([train] grad_clip_norm),
  // the update, the gradients cleared for the next step; on a GPU then the
  // loss sums' snapshot, and the figures are on their way (read already with
  // DeviceFigures::ReadBeforeUpdate: `figures` are returned as they are).
  StepFigures update(const StepInput& in, const BatchFigures& figures);
  // A worker whose update runs in another process (central_storage): the
  // gradients cleared for the next step without an update; on a GPU then the
  // loss sums' snapshot, as update() takes it.
  StepFigures skipUpdate(const BatchFigures& figures);
  // Scales replica 0's complete gradients to a global norm of at most
  // `max_norm` (core/optim/grad_clip.h's rule).
  void clip(double max_norm);

 private:
  // One process, no clipping, on the CPU: summing, update and clearing in one
  // pass over the buffers, chunk by chunk while they are in cache.
  void sumUpdateAndClear(const StepInput& in);
  // The sum of squares of replica 0's gradients, summed on the compute
  // threads in thread order (the same sum every time).
  double sumOfSquaresOnCpu();

  TrainingParts parts_;
  DeviceFigures device_figures_;
  std::unique_ptr<RecordedSteps> recorded_;
};

}  // namespace dtrain
