#include "core/train/local_step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/backend/device_ops.h"
#include "core/optim/grad_clip.h"
#include "core/optim/loss_scaler.h"
#include "core/optim/optimizer.h"
#include "core/train/step_profile.h"

namespace dtrain {

LocalStep::LocalStep(const TrainingParts& parts, bool record_graphs, DeviceFigures device_figures)
    : parts_(parts), device_figures_(device_figures) {
  // A step of micro-batches (accumulate) is not one recorded pass; a
  // recorded update reads one set of scalars, so it decays every tensor; a
  // per-position model's loss factor follows each batch's counted labels.
  if (record_graphs && onDevice() && parts_.job->job.cuda_graphs && !parts_.profile &&
      parts_.job->train.accumulate == 1 && parts_.optimizer->decayMask().all() &&
      parts_.replicas->labelsPerSample() == 1)
    recorded_ =
        std::make_unique<RecordedSteps>(*parts_.replicas, *parts_.optimizer, parts_.job->train.batch_size,
                                        parts_.job->train.grad_clip_norm, parts_.say);
}

LocalStep::~LocalStep() = default;

// fp16's steps are never replayed (runAlone): the line would not be true.
std::string LocalStep::describe() const {
  return recorded_ && !lossScaled(parts_) ? ", steps replayed as CUDA graphs" : "";
}

StepFigures LocalStep::runAlone(const StepInput& in) {
  // An fp16 step decides on the host whether it updates: never replayed.
  if (recorded_ && recorded_->takes(in.batch) && !lossScaled(parts_)) {
    const int64_t replayed = recorded_->replayed();
    recorded_->run(in.batch, in.lr, in.update, in.seed);
    if (parts_.graph_replays) *parts_.graph_replays += recorded_->replayed() - replayed;
    parts_.replicas->snapshotDeviceFigures();
    return StepFigures{BatchFigures{}, true};
  }
  const BatchFigures f = computeGradients(in, nullptr);
  if (!onDevice() && parts_.job->train.grad_clip_norm <= 0 && !lossScaled(parts_)) {
    sumUpdateAndClear(in);
    return StepFigures{f, false};
  }
  sumReplicas();
  return update(in, f);
}

BatchFigures LocalStep::computeGradients(const StepInput& in, BackwardListener* listener) {
  return parts_.replicas->trainStep(in.batch, in.seed, gradientScale(parts_, in), listener);
}

bool lossScaled(const TrainingParts& parts) { return parts.loss_scaler && parts.loss_scaler->enabled(); }

float gradientScale(const TrainingParts& parts, const StepInput& in) {
  const float factor = parts.loss_scaler ? parts.loss_scaler->lossFactor(in.update) : 1.0f;
  return factor / static_cast<float>(in.batch.global_size);
}

bool settleLossScale(const TrainingParts& parts, const StepInput& in, bool finite, StepFigures& out) {
  if (!lossScaled(parts)) return true;
  LossScaler& scaler = *parts.loss_scaler;
  const double used = scaler.scale();
  const bool goes_ahead = scaler.settle(finite);
  out.extra.emplace_back("loss_scale", used);
  out.extra.emplace_back("skipped_steps", static_cast<double>(scaler.state().skipped_steps));
  if (!goes_ahead && parts.say) {
    char line[192];
    std::snprintf(
        line, sizeof line,
        "step %lld: fp16 gradients hold an inf or a NaN at loss scale %g: update skipped, scale now %g",
        static_cast<long long>(in.update), used, scaler.scale());
    parts.say(line);
  }
  return goes_ahead;
}

std::optional<float> updateFactor(const TrainingParts& parts, const StepInput& in, double squares,
                                  StepFigures& out) {
  float factor = 1.0f;
  if (lossScaled(parts)) {
    // An inf or a NaN anywhere makes the sum one: the overflow check costs
    // the pass clipping makes anyway. The scale is read before settling
    // changes it.
    const float unscale = parts.loss_scaler->unscaleFactor();
    if (!settleLossScale(parts, in, std::isfinite(squares), out)) return std::nullopt;
    squares *= static_cast<double>(unscale) * unscale;
    factor = unscale;
  }
  const double clip_norm = parts.job->train.grad_clip_norm;
  if (clip_norm > 0) factor *= clipScale(squares, clip_norm);
  return factor;
}

void LocalStep::sumReplicas() {
  ReplicaSet& replicas = *parts_.replicas;
  if (onDevice() || replicas.threads() == 1) return;
  const int64_t n = replicas.store().size();
  WorkerPool& pool = replicas.pool();
  pool.run([&](int t) {
    auto [b, e] = WorkerPool::split(n, pool.size(), t, 16);
    replicas.sumGradients(b, e);
  });
}

BatchFigures LocalStep::readFigures(const BatchFigures& queued) {
  if (!onDevice()) return queued;
  if (device_figures_ != DeviceFigures::ReadBeforeUpdate)
    throw Error(
        "LocalStep: a GPU step's figures are read before its update only when asked for at construction");
  ReplicaSet& replicas = *parts_.replicas;
  replicas.snapshotDeviceFigures();
  return replicas.takeDeviceFigures();
}

StepFigures LocalStep::update(const StepInput& in, const BatchFigures& figures) {
  ReplicaSet& replicas = *parts_.replicas;
  ParamStore& store = replicas.store();
  float* params = store.params().data();
  float* grads = replicas.grads().data();
  const double clip_norm = parts_.job->train.grad_clip_norm;
  const StepInfo info{in.lr, in.update};
  PhaseSpan span(parts_.profile, DevicePhase::Optimizer);
  if (onDevice()) {
    StepFigures out{figures, false};
    bool goes_ahead = true;
    if (lossScaled(parts_)) {
      // fp16: the step's overflow decision needs the gradients' sum of
      // squares on the host (one wait per step; such steps are never
      // recorded as CUDA graphs), then unscaling and clipping in one scale.
      const std::optional<float> f =
          updateFactor(parts_, in, device_ops::sumOfSquares(parts_.device, grads, store.size()), out);
      goes_ahead = f.has_value();
      if (f && *f != 1.0f) device_ops::scale(parts_.device, grads, store.size(), *f);
    } else if (clip_norm > 0) {
      clip(clip_norm);
    }
    if (goes_ahead) {
      StepInfo fused = info;
      fused.half_copy = replicas.updatedHalfCopy();  // the fused cast-and-update of a 16-bit precision
      parts_.optimizer->update(params, grads, 0, store.size(), fused);
      if (fused.half_copy.data) replicas.halfCopyWritten();
    }
    replicas.grads().zero();
    // Figures read before the update (an elastic step) are returned as they
    // are, a skipped step's too; otherwise they are read a step later, when
    // the device has long got there.
    if (device_figures_ == DeviceFigures::ReadBeforeUpdate) return out;
    replicas.snapshotDeviceFigures();
    out.host = BatchFigures{};
    out.on_device = true;
    return out;
  }
  WorkerPool& pool = replicas.pool();
  auto range = [&](int t) { return WorkerPool::split(store.size(), pool.size(), t, 16); };
  StepFigures out{figures, false};
  // The factor (unscaling and clipping), then scaling, update and clearing in one pass.
  float factor = 1.0f;
  if (clip_norm > 0 || lossScaled(parts_)) {
    const std::optional<float> f = updateFactor(parts_, in, sumOfSquaresOnCpu(), out);
    if (!f) {
      replicas.grads().zero();
      return out;
    }
    factor = *f;
  }
  pool.run([&](int t) {
    auto [b, e] = range(t);
    if (factor != 1.0f) scale(grads, b, e, factor);
    parts_.optimizer->update(params, grads, b, e, info);
    std::fill(grads + b, grads + e, 0.0f);
  });
  return out;
}

double LocalStep::sumOfSquaresOnCpu() {
  ReplicaSet& replicas = *parts_.replicas;
  const float* grads = replicas.grads().data();
  const int64_t n = replicas.store().size();
  WorkerPool& pool = replicas.pool();
  std::vector<double> partial(static_cast<size_t>(pool.size()), 0.0);
  pool.run([&](int t) {
    auto [b, e] = WorkerPool::split(n, pool.size(), t, 16);
    partial[static_cast<size_t>(t)] = sumOfSquares(grads, b, e);
  });
  double total = 0;
  for (double p : partial) total += p;  // in thread order: the same sum every time
  return total;
}

void LocalStep::clip(double max_norm) {
  ReplicaSet& replicas = *parts_.replicas;
  float* grads = replicas.grads().data();
  const int64_t n = replicas.store().size();
  if (onDevice()) {
    // Norm, factor and scaling on the device: no read-back, no wait.
    device_ops::clipByNorm(parts_.device, grads, n, max_norm);
    return;
  }
  const float factor = clipScale(sumOfSquaresOnCpu(), max_norm);
  if (factor == 1.0f) return;
  WorkerPool& pool = replicas.pool();
  pool.run([&](int t) {
    auto [b, e] = WorkerPool::split(n, pool.size(), t, 16);
    scale(grads, b, e, factor);
  });
}

StepFigures LocalStep::skipUpdate(const BatchFigures& figures) {
  ReplicaSet& replicas = *parts_.replicas;
  replicas.grads().zero();
  if (!onDevice()) return StepFigures{figures, false};
  replicas.snapshotDeviceFigures();
  return StepFigures{BatchFigures{}, true};
}

void LocalStep::sumUpdateAndClear(const StepInput& in) {
  ReplicaSet& replicas = *parts_.replicas;
  ParamStore& store = replicas.store();
  float* params = store.params().data();
  float* grads = replicas.grads().data();
  WorkerPool& pool = replicas.pool();
  const StepInfo info{in.lr, in.update};
  PhaseSpan span(parts_.profile, DevicePhase::Optimizer);  // with summing the replicas' gradients
  // Chunks small enough to stay in cache between the three passes.
  constexpr int64_t kChunk = 4096;
  pool.run([&](int t) {
    auto [b, e] = WorkerPool::split(store.size(), pool.size(), t, 16);
    for (int64_t c = b; c < e; c += kChunk) {
      const int64_t ce = std::min(e, c + kChunk);
      replicas.sumGradients(c, ce);
      parts_.optimizer->update(params, grads, c, ce, info);
      std::fill(grads + c, grads + ce, 0.0f);
    }
  });
}

}  // namespace dtrain
