#include "strategies/sharded/sharded_strategy.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/errors.h"
#include "core/optim/grad_clip.h"
#include "core/train/step_profile.h"
#include "core/util/process_memory.h"
#include "strategies/batch_norm_across_workers.h"
#include "strategies/sharded/layer_groups.h"

namespace dtrain {

namespace {

// The part of `mask` over [begin, end), shifted to start at 0.
DecayMask maskOfRange(const DecayMask& mask, int64_t begin, int64_t end) {
  if (mask.all()) return DecayMask{};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  mask.split(begin, end, [&](int64_t b, int64_t e, bool decays) {
    if (decays) ranges.emplace_back(b - begin, e - begin);
  });
  return DecayMask::ranges(std::move(ranges));
}

double megabytes(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

ShardedStrategy::ShardedStrategy(int stage, std::shared_ptr<ProcessGroup> group)
    : GroupStrategy(std::move(group)), stage_(stage) {
  if (stage_ < 1 || stage_ > 3)
    throw ConfigError("[strategy] stage must be 1, 2 or 3 (got " + std::to_string(stage_) + ")");
}

ShardedStrategy::~ShardedStrategy() = default;

void ShardedStrategy::attach(const TrainingParts& parts) {
  if (!parts.device.isCpu())
    throw ConfigError(
        "[strategy] type 'sharded' runs on CPU workers in this build (GPU sharding is not built yet); set "
        "job.device = \"cpu\", or use 'mirrored' on GPUs");
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/false);
  if (worldSize() == 1) return;  // one worker owns everything: it trains as one process does
  ParamStore& store = parts.replicas->store();
  // Shards of many 2 MiB pages start on one (the buffers are aligned so,
  // Tensor::zerosInHugePages): a foreign shard's pages are then handed back
  // whole, never shared with this worker's own.
  constexpr int64_t kHugePageFloats = (int64_t(2) << 20) / 4;
  const bool large = store.size() >= int64_t(8) * kHugePageFloats * worldSize();
  plan_ = ShardPlan(store.size(), worldSize(), large ? kHugePageFloats : 16);
  const int64_t begin = plan_.begin(rank()), size = plan_.size(rank());
  optimizer_ = makeOptimizer(parts.job->optimizer);
  optimizer_->init(size, parts.device);
  optimizer_->setDecayMask(maskOfRange(parts.optimizer->decayMask(), begin, begin + size));
  // This worker's shard of the optimizer state: zeros on a fresh start; a
  // resume's chief holds the whole state it read and sends each worker its
  // shard, so no other worker ever holds more than its own.
  auto whole = parts.optimizer->stateBuffers();
  auto own = optimizer_->stateBuffers();
  int64_t resumed = rank() == 0 && !whole.empty() && whole[0].second->numel() == store.size() ? 1 : 0;
  group_->broadcastBytes(reinterpret_cast<uint8_t*>(&resumed), sizeof resumed, 0);
  if (resumed) {
    std::vector<float> passing;  // another worker's shard on its way
    for (size_t b = 0; b < own.size(); ++b) {
      if (rank() == 0)
        std::memcpy(own[b].second->data(), whole[b].second->data(), static_cast<size_t>(size) * 4);
      for (int r = 1; r < worldSize(); ++r) {
        float* at = own[b].second->data();
        if (rank() == 0) {
          at = whole[b].second->data() + plan_.begin(r);
        } else if (rank() != r) {
          passing.resize(static_cast<size_t>(plan_.size(r)));
          at = passing.data();
        }
        group_->broadcast(at, plan_.size(r), 0);
      }
    }
  }
  parts.optimizer->init(0, parts.device);
  // Stage 2: the gradient buffers hold pages only where backward writes and
  // in this worker's shard, from the first step on.
  if (stage_ >= 2) {
    ReplicaSet& replicas = *parts.replicas;
    float* grads = replicas.grads().data();
    plan_.forEachForeignPart(rank(), 0, store.size(),
                             [&](int64_t b, int64_t e) { releaseFloats(grads, b, e); });
    replicas.releaseOtherReplicasGradients(0, store.size());
  }
  if (stage_ == 3) {
    attachStageThree(parts);
    return;
  }
  gradients_ = std::make_unique<GradientSum>(*local_, *group_,
                                             [this](float* grads, int64_t n) { sumIntoShards(grads, n); });
}

void ShardedStrategy::attachStageThree(const TrainingParts& parts) {
  ReplicaSet& replicas = *parts.replicas;
  if (replicas.threads() != 1)
    throw ConfigError("[strategy] stage 3 needs one compute thread per worker, this one has " +
                      std::to_string(replicas.threads()) + "; set job.threads = 1 (and more workers)");
  const auto group_bytes = static_cast<int64_t>(parts.job->strategy.bucket_mb * (1 << 20));
  float* grads = replicas.grads().data();
  gathered_ = std::make_unique<GatheredParameters>(
      *group_, plan_, replicas.store().params().data(),
      planLayerGroups(replicas.model(), replicas.store(), group_bytes),
      [this, grads](int64_t begin, int64_t end) { sumIntoShards(grads + begin, end - begin); });
  replicas.setParameterGate(gathered_.get());
}

std::string ShardedStrategy::describeRun() const {
  if (worldSize() == 1) return local_ ? local_->describe() : "";
  const ReplicaSet& replicas = *local_->parts().replicas;
  const int64_t n = plan_.total(), own = plan_.size(rank());
  const int64_t state_floats = optimizerStateFloats();
  auto mb = [](int64_t floats) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", megabytes(floats * 4));
    return std::string(text);
  };
  const std::string in_flight = stage_ == 3 ? " + the groups in use" : " + the buckets in flight";
  const std::string sizes = " (this worker: parameters " + (stage_ == 3 ? mb(own) + in_flight : mb(n)) +
                            ", gradients " +
                            (stage_ == 1 ? mb(n * replicas.threads()) : mb(own) + in_flight) +
                            ", optimizer state " + mb(state_floats) + ")";
  const std::string what = stage_ == 1   ? "optimizer state"
                           : stage_ == 2 ? "optimizer state and gradients"
                                         : "optimizer state, gradients and parameters";
  const std::string how =
      gathered_
          ? ", parameters all-gathered in " + std::to_string(gathered_->groups().groups.size()) +
                " layer groups as the passes reach them (one ahead), gradients reduce-scattered by group in "
                "the last backward"
          : ", gradients reduce-scattered " + gradients_->describe() +
                ", parameters all-gathered after each update";
  return " per worker, " + std::to_string(worldSize()) + " workers, stage " + std::to_string(stage_) + ": " +
         what + " sharded" + sizes + how + ", over " + group_->describe();
}

int64_t ShardedStrategy::optimizerStateFloats() const {
  int64_t floats = 0;
  for (auto& [name, tensor] : optimizer_->stateBuffers()) floats += tensor->numel();
  return floats;
}

void ShardedStrategy::sumIntoShards(float* grads, int64_t n) {
  float* base = local_->parts().replicas->grads().data();  // replica 0's
  const int64_t begin = grads - base, end = begin + n;
  ReplicaSet& replicas = *local_->parts().replicas;
  if (stage_ >= 2) replicas.releaseOtherReplicasGradients(begin, end);  // summed into replica 0's already
  group_->reduceScatterSum(grads, plan_.countsWithin(begin, end));
  // The step's gradients are at their most before a bucket's other parts go
  // (the backward of earlier layers writing meanwhile). Stage 1 keeps them
  // whole: nothing to measure on the communication thread.
  if (stage_ >= 2) {
    int64_t resident = 0;
    for (int t = 0; t < replicas.threads(); ++t) {
      const Tensor& g = replicas.replicaGradients(t);
      resident += residentBytes(g.data(), g.numel());
    }
    grads_peak_bytes_ = std::max(grads_peak_bytes_, resident);
  }
  // What other workers own of the range is theirs to update.
  plan_.forEachForeignPart(rank(), begin, end, [&](int64_t b, int64_t e) {
    if (stage_ >= 2)
      releaseFloats(base, b, e);
    else
      std::fill(base + b, base + e, 0.0f);
  });
}

StepFigures ShardedStrategy::step(const StepInput& in) {
  if (!local_) throw Error("sharded: step before attach");
  if (worldSize() == 1) return local_->runAlone(in);
  // Synchronised statistics need samples in every worker's every
  // micro-batch; an epoch's last global batch smaller than that is skipped
  // by all alike.
  if (gradients_ && gradients_->syncsBatchStats() &&
      in.batch.global_size < worldSize() * local_->parts().job->train.accumulate)
    return StepFigures{};
  grads_peak_bytes_ = 0;
  StepFigures out{gradients_ ? gradients_->compute(in) : gatherAndCompute(in), false};
  // What this worker holds of the training state (metrics.jsonl): the
  // parameters and gradients at their most during the step, as the
  // gathers and reductions saw them.
  const int64_t state_floats = optimizerStateFloats();
  out.extra.emplace_back("params_mb",
                         megabytes(gathered_ ? gathered_->peakResidentBytes() : plan_.total() * 4));
  const ReplicaSet& replicas = *local_->parts().replicas;
  const int64_t whole_grads = plan_.total() * 4 * replicas.threads();
  out.extra.emplace_back("grads_peak_mb", megabytes(stage_ == 1 ? whole_grads : grads_peak_bytes_));
  out.extra.emplace_back("optimizer_state_mb", megabytes(state_floats * 4));
  updateShard(in, out);
  if (!gathered_) gatherParameters();  // stage 3 gathers them layer group by group in the next passes
  return out;
}

BatchFigures ShardedStrategy::gatherAndCompute(const StepInput& in) {
  gathered_->beginStep(local_->parts().job->train.accumulate);
  BatchFigures f;
  try {
    f = local_->computeGradients(in, nullptr);
  } catch (...) {
    gathered_->cancel();
    throw;
  }
  PhaseSpan span(local_->parts().profile, DevicePhase::Communication);  // what the passes did not hide
  gathered_->finish();
  return f;
}

void ShardedStrategy::updateShard(const StepInput& in, StepFigures& out) {
  const TrainingParts& parts = local_->parts();
  ReplicaSet& replicas = *parts.replicas;
  float* params = replicas.store().params().data();
  float* grads = replicas.grads().data();
  const int64_t begin = plan_.begin(rank()), size = plan_.size(rank());
  WorkerPool& pool = replicas.pool();
  auto range = [&](int t) { return WorkerPool::split(size, pool.size(), t, 16); };
  PhaseSpan span(parts.profile, DevicePhase::Optimizer);
  float factor = 1.0f;
  if (parts.job->train.grad_clip_norm > 0 || lossScaled(parts)) {
    // The global norm: the shards' sums of squares, summed over the workers.
    std::vector<double> partial(static_cast<size_t>(pool.size()), 0.0);
    pool.run([&](int t) {
      auto [b, e] = range(t);
      partial[static_cast<size_t>(t)] = sumOfSquares(grads + begin, b, e);
    });
    double squares = 0;
    for (double p : partial) squares += p;
    group_->allReduceSum(&squares, 1);
    const std::optional<float> f = updateFactor(parts, in, squares, out);
    if (!f) {  // fp16 overflow: no update, the same decision on every worker
      std::fill(grads + begin, grads + begin + size, 0.0f);
      return;
    }
    factor = *f;
  }
  const StepInfo info{in.lr, in.update};
  pool.run([&](int t) {
    auto [b, e] = range(t);
    if (factor != 1.0f) scale(grads + begin, b, e, factor);
    optimizer_->update(params + begin, grads + begin, b, e, info);
    std::fill(grads + begin + b, grads + begin + e, 0.0f);
  });
}

void ShardedStrategy::gatherParameters() {
  PhaseSpan span(local_->parts().profile, DevicePhase::Communication);
  ReplicaSet& replicas = *local_->parts().replicas;
  float* params = replicas.store().params().data();
  group_->allGatherInPlace(params, plan_.countsWithin(0, plan_.total()));
  replicas.paramsChangedElsewhere();  // a 16-bit copy is cast again from them
}

void ShardedStrategy::agreeOnBuffers(ParamStore& buffers) {
  averageBuffers(*group_, buffers, gradients_ && gradients_->syncsBatchStats());
  // Evaluation and checkpoints read the parameters whole, until the next step.
  if (gathered_ && !gathered_->whole()) gathered_->gatherAll();
}

void ShardedStrategy::streamStatePiece(size_t b, int64_t begin, int64_t count, float* out) {
  const Tensor& own = *optimizer_->stateBuffers()[b].second;
  for (int r = 0; r < worldSize(); ++r) {
    const int64_t pb = std::max(begin, plan_.begin(r)), pe = std::min(begin + count, plan_.end(r));
    if (pe <= pb) continue;
    float* dst = out + (pb - begin);
    if (r == rank()) std::memcpy(dst, own.data() + (pb - plan_.begin(r)), static_cast<size_t>(pe - pb) * 4);
    group_->broadcast(dst, pe - pb, r);
  }
}

std::vector<NamedTensorView> ShardedStrategy::stateViews(const ParamStore& store) {
  std::vector<NamedTensorView> views;
  if (!optimizer_) return views;
  const auto buffers = optimizer_->stateBuffers();
  for (size_t b = 0; b < buffers.size(); ++b)
    for (const ParamEntry& e : store.entries()) {
      NamedTensorView v{buffers[b].first + "." + e.name, e.shape, nullptr};
      const int64_t offset = e.offset;
      v.fill = [this, b, offset](int64_t first, int64_t count, float* out) {
        streamStatePiece(b, offset + first, count, out);
      };
      views.push_back(std::move(v));
    }
  return views;
}

}  // namespace dtrain
