#include "strategies/pipeline/pipeline_strategy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include "core/backend/device_memory.h"
#include "core/backend/device_ops.h"
#include "core/comm/device_groups.h"
#include "core/errors.h"
#include "core/nn/device_layers.h"
#include "core/nn/layer_registry.h"
#include "core/optim/decay_mask.h"
#include "core/optim/grad_clip.h"
#include "core/train/local_step.h"
#include "core/train/weight_decay_mask.h"
#include "datasets/micro_batch.h"
#include "models/model_builder.h"
#include "strategies/batch_norm_across_workers.h"
#include "strategies/pipeline/pipeline_plan.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/stage_split.h"

namespace dtrain::pipeline {

namespace {

std::string layerOf(const std::string& tensor) { return tensor.substr(0, tensor.rfind('.')); }

// n floats between any two of host and device memory.
void copyFloats(float* to, Device to_device, const float* from, Device from_device, int64_t n) {
  copyDeviceMemory(to, to_device, from, from_device, static_cast<size_t>(n) * sizeof(float));
}

// Where each stage's tensors of `from` sit in the whole layout and in the
// stage's own, laid out as ParamStore::add lays out the stage model's (the
// same tensors in the same order, each on a 16-float boundary).
std::vector<std::vector<PlacedTensor>> placeByStage(const ParamStore& from,
                                                    const std::map<std::string, int>& stage_by_layer,
                                                    int stages) {
  std::vector<std::vector<PlacedTensor>> out(static_cast<size_t>(stages));
  std::vector<int64_t> floats(static_cast<size_t>(stages), 0);
  for (const ParamEntry& e : from.entries()) {
    const auto s = static_cast<size_t>(stage_by_layer.at(layerOf(e.name)));
    out[s].push_back(PlacedTensor{e.offset, floats[s], e.shape.numel()});
    floats[s] += ParamStore::paddedSize(e.shape.numel());
  }
  return out;
}

}  // namespace

PipelineStrategy::PipelineStrategy(const StrategySection& cfg, std::shared_ptr<ProcessGroup> all,
                                   std::shared_ptr<ProcessGroup> link_group,
                                   std::shared_ptr<ProcessGroup> replicas_of_stage, Store* store,
                                   std::string shm_prefix, std::chrono::milliseconds timeout)
    : cfg_(cfg),
      all_(std::move(all)),
      link_group_(std::move(link_group)),
      replicas_of_stage_(std::move(replicas_of_stage)),
      store_(store),
      shm_prefix_(std::move(shm_prefix)),
      timeout_(timeout) {
  if (all_->size() != cfg_.stages * cfg_.replicas)
    throw ConfigError("[strategy] pipeline of " + std::to_string(cfg_.stages) + " stages x " +
                      std::to_string(cfg_.replicas) + " replicas needs " +
                      std::to_string(cfg_.stages * cfg_.replicas) + " processes, but " +
                      std::to_string(all_->size()) + " joined");
}

PipelineStrategy::~PipelineStrategy() = default;

void PipelineStrategy::broadcastParameters(float* params, int64_t n) { all_->broadcast(params, n, 0); }

void PipelineStrategy::broadcastFromChief(void* data, int64_t bytes) {
  all_->broadcastBytes(static_cast<uint8_t*>(data), bytes, 0);
}

void PipelineStrategy::reduceFigures(double* values, int64_t n) { all_->allReduceSum(values, n); }

void PipelineStrategy::attach(const TrainingParts& parts) {
  parts_ = parts;
  const Device device = parts.device;
  // A GPU stage's gradients are summed over its replicas through host memory.
  if (!device.isCpu() && replicas_of_stage_)
    replicas_of_stage_ = stageThroughHost(replicas_of_stage_, device);
  layers_ = device.isCpu() ? builtinLayers() : layersFor(device, parts.gpu_layers);
  const JobConfig& job = *parts.job;
  const Model& whole = parts.replicas->model();
  // Every rank times the layers at once, so each sees the others' load on
  // the machine as the stages will; the split takes the ranks' mean, the
  // same figures everywhere, so all of them cut the model in the same places.
  costs_ = pipelineCosts(job, whole, parts.replicas->classes(), /*measure=*/true, layers_, device);
  std::vector<double> seconds;
  for (const LayerCost& c : costs_) seconds.push_back(c.seconds);
  all_->allReduceSum(seconds.data(), static_cast<int64_t>(seconds.size()));
  for (size_t i = 0; i < costs_.size(); ++i) costs_[i].seconds = seconds[i] / worldSize();
  const PipelinePlan plan = planPipeline(job, whole, costs_);
  if (isChief() && cfg_.stage_layers.empty())
    for (const std::string& line : describePlan(plan, true)) parts.say(line);
  buildStages(plan);
}

void PipelineStrategy::buildStages(const PipelinePlan& plan) {
  const JobConfig& job = *parts_.job;
  const Model& whole = parts_.replicas->model();
  const int64_t classes = parts_.replicas->classes();
  const std::vector<LayerSpec> specs = modelLayerSpecs(job.model, classes);
  const int64_t micro = microBatchRows(cfg_, job.train.batch_size);
  // The old stage's link and rings go before the new ones are made.
  link_.reset();
  worker_.reset();
  stage_of_ = plan.stage_of;
  worker_ = std::make_unique<StageWorker>(whole, specs, plan.stage_of, plan.schedule, stage(), micro, classes,
                                          layers_, layerDefaultsOf(job.model), parts_.device,
                                          static_cast<float>(job.train.label_smoothing));
  // Every stage's activation memory, for the start-up line.
  activation_bytes_.assign(static_cast<size_t>(worldSize()), 0.0f);
  const float mine_mb = static_cast<float>(worker_->activationBytes()) / 1e6f;
  all_->allGather(&mine_mb, 1, activation_bytes_.data());
  std::vector<std::string> names;
  for (int k = 0; k < cfg_.stages; ++k)
    names.push_back("stage " + std::to_string(k) + " (rank " + std::to_string(replica() * cfg_.stages + k) +
                    ")");
  // GPU stages whose run's group is NCCL (each rank a GPU of its own)
  // message each other over NCCL too, device memory in place.
  if (!parts_.device.isCpu() && all_->deviceNative())
    link_ = ncclLink(*store_, shm_prefix_ + "/nccl/" + std::to_string(builds_), stage(), cfg_.stages,
                     parts_.device, timeout_);
  else if (link_group_)
    link_ = groupLink(link_group_);
  else  // each build's rings under names of their own
    link_ = sharedMemoryLink(*store_, shm_prefix_ + "/" + std::to_string(builds_), stage(), cfg_.stages,
                             worker_->stepBytesFromBefore(), worker_->stepBytesFromAfter(), names, timeout_);
  ++builds_;
  worker_->nameStages(std::move(names));

  std::map<std::string, int> stage_by_layer;
  for (size_t i = 0; i < whole.nodes().size(); ++i)
    stage_by_layer[whole.nodes()[i].layer->name()] = plan.stage_of[i];
  ParamStore& store = parts_.replicas->store();
  ParamStore& buffers = parts_.replicas->buffers();
  params_of_ = placeByStage(store, stage_by_layer, cfg_.stages);
  buffers_of_ = placeByStage(buffers, stage_by_layer, cfg_.stages);
  // This stage's own offsets, from its own stores (a borrowed copy among them
  // shifts those after it), checked to hold what the whole model's do.
  auto locate = [&](const ParamStore& whole_store, const ParamStore& own, std::vector<PlacedTensor>& mine) {
    size_t i = 0;
    for (const ParamEntry& e : whole_store.entries()) {
      if (stage_by_layer.at(layerOf(e.name)) != stage()) continue;
      const ParamEntry* o = own.find(e.name);
      if (!o || o->shape != e.shape)
        throw Error("pipeline: stage " + std::to_string(stage()) + " lays out '" + e.name +
                    "' unlike the whole model");
      mine.at(i++).own = o->offset;
    }
    return i;
  };
  const size_t own_params = locate(store, worker_->params(), params_of_[static_cast<size_t>(stage())]);
  const size_t own_buffers = locate(buffers, worker_->buffers(), buffers_of_[static_cast<size_t>(stage())]);
  // A weight shared with another stage: the owner's entry, the borrower's copy.
  auto firstEntryOf = [](const ParamStore& s, const std::string& layer) -> const ParamEntry& {
    for (const ParamEntry& e : s.entries())
      if (layerOf(e.name) == layer) return e;
    throw Error("pipeline: layer '" + layer + "' holds no weight to share");
  };
  shared_.clear();
  borrowed_.clear();
  for (const SharedWeight& w : sharedAcrossStages(whole, plan.stage_of)) {
    const ParamEntry& owner = firstEntryOf(store, w.owner);
    PlacedTensor t{owner.offset, -1, owner.shape.numel()};
    if (w.owner_stage == stage()) t.own = firstEntryOf(worker_->params(), w.owner).offset;
    if (w.borrower_stage == stage()) {
      const ParamEntry& copy = firstEntryOf(worker_->params(), w.borrower);
      if (copy.shape != owner.shape)
        throw Error("pipeline: '" + w.borrower + "' holds " + copy.shape.str() + " for '" + w.owner + "''s " +
                    owner.shape.str());
      t.own = copy.offset;
      borrowed_.push_back(t);
    }
    shared_.push_back(t);
  }
  if (own_params + borrowed_.size() != worker_->params().entries().size() ||
      own_buffers != worker_->buffers().entries().size())
    throw Error("pipeline: stage " + std::to_string(stage()) + " holds tensors the whole model does not");

  // The stage starts from the whole copies every rank holds (the chief's, or
  // those every stage gathered into them).
  optimizer_ = makeOptimizer(job.optimizer);
  optimizer_->init(worker_->params().size(), parts_.device);
  // The whole model's choice, carried to this stage's layout: a borrowed
  // copy decays as its owner does.
  {
    const std::vector<float> whole_flags = weightDecayMask(store, job.optimizer).flags(store.size());
    std::vector<float> flags(static_cast<size_t>(worker_->params().size()), 0.0f);
    for (const auto* placed : {&params_of_[static_cast<size_t>(stage())], &borrowed_})
      for (const PlacedTensor& p : *placed)
        std::copy_n(whole_flags.begin() + p.whole, p.numel, flags.begin() + p.own);
    optimizer_->setDecayMask(DecayMask::fromFlags(flags.data(), static_cast<int64_t>(flags.size())));
  }
  auto whole_state = parts_.optimizer->stateBuffers();
  auto own_state = optimizer_->stateBuffers();
  auto copyIn = [](const Tensor& from, Tensor& to, const std::vector<PlacedTensor>& where) {
    for (const PlacedTensor& p : where)
      copyFloats(to.data() + p.own, to.device(), from.data() + p.whole, from.device(), p.numel);
  };
  const std::vector<PlacedTensor>& mine = params_of_[static_cast<size_t>(stage())];
  copyIn(store.params(), worker_->params().params(), mine);
  copyIn(store.params(), worker_->params().params(), borrowed_);
  copyIn(buffers.params(), worker_->buffers().params(), buffers_of_[static_cast<size_t>(stage())]);
  for (size_t b = 0; b < own_state.size(); ++b)
    if (whole_state[b].second->numel() > 0) {
      copyIn(*whole_state[b].second, *own_state[b].second, mine);
      copyIn(*whole_state[b].second, *own_state[b].second, borrowed_);
    }

  layout_.clear();
  for (size_t k = 0; k < plan.stages.size(); ++k)
    layout_ += (k ? "; " : "") + std::string("stage ") + std::to_string(k) + ": " + plan.stages[k].first +
               (plan.stages[k].last == plan.stages[k].first ? "" : ".." + plan.stages[k].last);
  busy_seconds_.assign(static_cast<size_t>(cfg_.stages), 0.0);
  steps_timed_ = 0;
}

void PipelineStrategy::rebalance(int64_t step) {
  rebalanced_ = true;  // once, whatever it decides
  const JobConfig& job = *parts_.job;
  const Model& whole = parts_.replicas->model();
  std::vector<double> per_micro;
  for (double busy : busy_seconds_)
    per_micro.push_back(busy / static_cast<double>(steps_timed_ * cfg_.replicas * cfg_.micro_batches));
  const std::vector<LayerCost> measured = costsMatching(costs_, stage_of_, per_micro);
  const PipelinePlan next = planPipeline(job, whole, measured);
  double now = 0, then = 0;
  for (size_t k = 0; k < per_micro.size(); ++k) {
    now = std::max(now, per_micro[k]);
    then = std::max(then, next.stages[k].seconds);
  }
  std::string times;
  for (size_t k = 0; k < per_micro.size(); ++k) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%s%.3g", k ? " / " : "", per_micro[k] * 1e3);
    times += ms;
  }
  const std::string measured_line = "pipeline: after step " + std::to_string(step) + " the stages computed " +
                                    times + " ms per micro-batch";
  // Moving costs a gather and a rebuild: only for a slowest stage 1% faster.
  if (next.stage_of == stage_of_ || then > kRebalanceGain * now) {
    if (isChief()) parts_.say(measured_line + "; the cuts stay");
    return;
  }
  // Every stage's values into the whole copies, then the new stages from them.
  agreeOnBuffers(parts_.replicas->buffers());
  costs_ = measured;
  buildStages(next);
  if (isChief()) {
    char predicted[32];
    std::snprintf(predicted, sizeof predicted, "%.3g", then * 1e3);
    parts_.say(measured_line + "; moved the cuts (" + layout_ + "), the slowest stage predicted at " +
               predicted + " ms");
  }
}

std::string PipelineStrategy::describeRun() const {
  std::string held;
  for (int k = 0; k < cfg_.stages; ++k) {
    char mb[32];
    std::snprintf(
        mb, sizeof mb, "%.1f",
        activation_bytes_.empty() ? 0.0 : static_cast<double>(activation_bytes_[static_cast<size_t>(k)]));
    held += (k ? " / " : "") + std::string(mb);
  }
  return ", " + std::to_string(cfg_.stages) + " stages x " + std::to_string(cfg_.replicas) +
         (cfg_.replicas == 1 ? " replica" : " replicas") + ", " + cfg_.schedule + " over " +
         std::to_string(cfg_.micro_batches) + " micro-batches (" + layout_ + "), messages over " +
         link_->describe() + ", activations held per stage " + held + " MB";
}

StepFigures PipelineStrategy::step(const StepInput& in) {
  if (!worker_) throw Error("pipeline: step before attach");
  const float scale = gradientScale(parts_, in);
  const auto t0 = std::chrono::steady_clock::now();
  StepFigures out;
  float busy_and_span[2] = {0, 0};
  // [train] accumulate: the schedule runs once per micro-batch of the
  // replica's slice, its gradients adding up; the all-reduce and the update
  // come in the last run only. Each run's messages carry a number of their own.
  const int64_t runs = parts_.job->train.accumulate;
  BatchFigures f;
  double busy = 0;
  for (int64_t r = 0; r < runs; ++r) {
    const bool last = r + 1 == runs;
    const Batch micro = runs == 1 ? Batch{} : nthMicroBatch(in.batch, r, runs);
    f += worker_->step(
        runs == 1 ? in.batch : micro, (in.update - 1) * runs + r + 1, in.seed, scale, *link_, [&](Op op) {
          if (!last) return;
          // The pipeline's part of the step ends where its gradients are complete.
          if (busy_and_span[1] == 0)
            busy_and_span[1] = std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count();
          if (op == Op::AllReduce && replicas_of_stage_)
            replicas_of_stage_->allReduceSum(worker_->grads().data(), worker_->grads().numel());
          if (op == Op::Update) {
            meetSharedGradients();
            update(in, out);
          }
        });
    busy += worker_->busySeconds();
  }
  // The bubble, as GPipe counts it: the share of the stages' time (each the
  // slowest stage's span) not spent computing.
  busy_and_span[0] = static_cast<float>(busy);
  std::vector<float> all(2 * static_cast<size_t>(worldSize()));
  all_->allGather(busy_and_span, 2, all.data());
  double all_busy = 0, span = 0;
  for (size_t r = 0; r < all.size(); r += 2) {
    all_busy += all[r];
    span = std::max(span, static_cast<double>(all[r + 1]));
  }
  out.host = f;
  if (span > 0) out.extra.emplace_back("pipeline_bubble", 1.0 - all_busy / (worldSize() * span));
  // The automatic split, corrected once by what the stages measured running
  // together (steps after the first, whose allocations it would count).
  const int after = cfg_.rebalance_after_steps;
  if (after > 0 && !rebalanced_ && cfg_.stage_layers.empty()) {
    ++steps_run_;
    if (steps_run_ > 1 || after == 1) {
      for (size_t r = 0; r < all.size(); r += 2)
        busy_seconds_[(r / 2) % static_cast<size_t>(cfg_.stages)] += all[r];
      ++steps_timed_;
    }
    if (steps_run_ >= after) rebalance(in.update);
  }
  return out;
}

BatchFigures PipelineStrategy::evaluateBatch(const Batch& batch) {
  if (!worker_) throw Error("pipeline: evaluation before attach");
  return worker_->evaluate(batch, ++evaluations_, *link_);
}

void PipelineStrategy::meetSharedGradients() {
  if (shared_.empty()) return;
  // The stages' sends are handed over first: a neighbour may still be
  // receiving them before it joins the sum.
  link_->waitSends();
  Tensor& grads = worker_->grads();
  for (const PlacedTensor& t : shared_) {
    // Replica 0's copies, summed over its replicas already (AllReduce comes
    // before Update), are the whole gradient's two parts; the other
    // replicas add zeros, so the sum is exact and the same on every rank.
    std::vector<float> sum(static_cast<size_t>(t.numel), 0.0f);
    if (t.own >= 0 && replica() == 0)
      copyFloats(sum.data(), Device::cpu(), grads.data() + t.own, grads.device(), t.numel);
    all_->allReduceSum(sum.data(), t.numel);
    if (t.own >= 0) copyFloats(grads.data() + t.own, grads.device(), sum.data(), Device::cpu(), t.numel);
  }
}

void PipelineStrategy::update(const StepInput& in, StepFigures& out) {
  Tensor& grads = worker_->grads();
  const int64_t n = grads.numel();
  const double clip_norm = parts_.job->train.grad_clip_norm;
  if (clip_norm > 0 || lossScaled(parts_)) {
    // The norm of the whole model's summed gradient: every stage's part, once
    // (each stage's replicas hold the same sum). An inf or a NaN in any
    // stage's part makes it one on every rank: fp16's overflow, agreed on.
    const Device device = grads.device();
    auto squaresOf = [&](int64_t at, int64_t count) {
      return device.isCpu() ? sumOfSquares(grads.data(), at, at + count)
                            : device_ops::sumOfSquares(device, grads.data() + at, count);
    };
    // A borrowed copy's gradient is its owner's: counted once, there.
    double squares = squaresOf(0, n);
    for (const PlacedTensor& b : borrowed_) squares -= squaresOf(b.own, b.numel);
    all_->allReduceSum(&squares, 1);
    const std::optional<float> f = updateFactor(parts_, in, squares / cfg_.replicas, out);
    if (!f) {
      grads.zero();
      return;
    }
    const float factor = *f;
    if (factor != 1.0f) {
      if (device.isCpu())
        scale(grads.data(), 0, n, factor);
      else
        device_ops::scale(device, grads.data(), n, factor);
    }
  }
  optimizer_->update(worker_->params().params().data(), grads.data(), 0, n, StepInfo{in.lr, in.update});
  grads.zero();
}

void PipelineStrategy::agreeOnBuffers(ParamStore& /*buffers: the whole copy, which gather() fills*/) {
  if (!worker_) return;
  // Running statistics: each replica's, averaged (as mirrored does).
  if (replicas_of_stage_) averageBuffers(*replicas_of_stage_, worker_->buffers(), /*synchronised=*/false);
  gather();
}

void PipelineStrategy::gather() {
  ParamStore& store = parts_.replicas->store();
  ParamStore& buffers = parts_.replicas->buffers();
  auto whole_state = parts_.optimizer->stateBuffers();
  auto own_state = optimizer_->stateBuffers();
  for (int s = 0; s < cfg_.stages; ++s) {
    const auto k = static_cast<size_t>(s);
    // The stage's values as its first replica (rank s) holds them: its
    // parameters, buffers and optimizer state, one after the other.
    std::vector<std::pair<Tensor*, const std::vector<PlacedTensor>*>> parts = {
        {&store.params(), &params_of_[k]}, {&buffers.params(), &buffers_of_[k]}};
    std::vector<Tensor*> own = {&worker_->params().params(), &worker_->buffers().params()};
    for (size_t b = 0; b < whole_state.size(); ++b)
      if (whole_state[b].second->numel() > 0) {
        parts.emplace_back(whole_state[b].second, &params_of_[k]);
        own.push_back(own_state[b].second);
      }
    int64_t total = 0;
    for (const auto& [tensor, where] : parts)
      for (const PlacedTensor& p : *where) total += p.numel;
    std::vector<float> packed(static_cast<size_t>(total));
    const bool root = rank() == s;
    // Through host memory, tensor by tensor (a GPU's too): once per
    // evaluation or checkpoint.
    if (root) {
      int64_t at = 0;
      for (size_t j = 0; j < parts.size(); ++j)
        for (const PlacedTensor& p : *parts[j].second) {
          copyFloats(packed.data() + at, Device::cpu(), own[j]->data() + p.own, own[j]->device(), p.numel);
          at += p.numel;
        }
    }
    all_->broadcast(packed.data(), total, s);
    int64_t at = 0;
    for (const auto& [tensor, where] : parts)
      for (const PlacedTensor& p : *where) {
        copyFloats(tensor->data() + p.whole, tensor->device(), packed.data() + at, Device::cpu(), p.numel);
        at += p.numel;
      }
  }
}

}  // namespace dtrain::pipeline
