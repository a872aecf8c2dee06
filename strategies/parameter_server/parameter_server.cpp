#include "strategies/parameter_server/parameter_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "core/comm/lost_ranks.h"
#include "core/errors.h"
#include "core/optim/grad_clip.h"
#include "core/optim/loss_scaler.h"
#include "core/optim/optimizer.h"
#include "core/train/local_step.h"
#include "core/train/step_profile.h"
#include "core/util/seconds.h"
#include "strategies/batch_norm_across_workers.h"
#include "strategies/parameter_server/shard_process.h"

namespace dtrain {

namespace {

// A device buffer's host copy, or the buffer itself on the CPU.
Tensor onHost(const Tensor& t) { return t.device().isCpu() ? t : t.to(Device::cpu()); }

ps::SliceFigures sliceFiguresOf(const BatchFigures& f, int stop) {
  return ps::SliceFigures{f.loss_sum, static_cast<double>(f.correct), static_cast<double>(f.samples), stop};
}

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(std::shared_ptr<ProcessGroup> workers,
                                                 std::vector<std::string> shard_endpoints,
                                                 uint64_t generation, double timeout_s,
                                                 std::string consistency, Store* store)
    : workers_(std::move(workers)),
      endpoints_(std::move(shard_endpoints)),
      generation_(generation),
      timeout_s_(timeout_s),
      consistency_(std::move(consistency)),
      store_(store),
      handover_(workers_->size()) {
  // Tests slow one worker down to see the staleness bound hold.
  if (const char* slow = std::getenv("DTRAIN_TEST_SLOW_WORKER")) {
    int rank = -1, ms = 0;
    if (std::sscanf(slow, "%d:%d", &rank, &ms) == 2 && rank == workers_->rank()) slow_ms_ = ms;
  }
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

void ParameterServerStrategy::broadcastFromChief(void* data, int64_t bytes) {
  workers_->broadcastBytes(static_cast<uint8_t*>(data), bytes, 0);
}

bool ParameterServerStrategy::syncsBatchStats() const {
  return dtrain::syncsBatchStats(local_->parts(), worldSize());
}

void ParameterServerStrategy::attach(const TrainingParts& parts) {
  local_ = std::make_unique<LocalStep>(parts, /*record_graphs=*/false);
  ReplicaSet& replicas = *parts.replicas;
  // fp16's pushes leave whole: a part sent during backward could not be
  // unscaled yet, nor its overflow known.
  if (consistency_ == "sync" && !local_->onDevice() && !lossScaled(parts) &&
      parts.job->strategy.gradient_push != "after_backward") {
    // Synchronous pushes leave in parts while backward runs, bucket by bucket
    // as mirrored's all-reduce does, so the shards sum and apply the last
    // layers while the workers compute the first (with sync_batchnorm, whole
    // after backward; the statistics are summed over the workers then).
    gradients_ =
        std::make_unique<GradientSum>(*local_, *workers_, [this, &replicas](float* grads, int64_t n) {
          const int64_t begin = grads - replicas.grads().data();
          shards_->pushPart(pushes_, part_lr_, replicas.grads().data(), begin, begin + n);
        });
    gradients_described_ = gradients_->describe();
  } else if (syncsBatchStats()) {
    sumBatchStatsOver(*workers_, replicas);
  }
  placement_ = placeVariables(replicas.store(), static_cast<int>(endpoints_.size()));
  if (isChief() && parts.say)
    for (const std::string& line : describePlacement(placement_, false))
      parts.say("parameter server: " + line);
  shards_ = std::make_unique<ShardClients>(endpoints_, placement_, rank(), generation_, timeout_s_);
  shards_->startAt(parts.updates_done);
  shards_->startLive(worldSize());
  pushes_ = parts.updates_done;  // the shards' clocks start at the chief's step
  if (isChief()) {
    // The shards start from the chief's state: fresh, or its checkpoint's.
    const Tensor params = onHost(replicas.store().params());
    std::vector<Tensor> state;
    std::vector<const float*> state_data;
    for (auto& [name, buffer] : parts.optimizer->stateBuffers()) {
      state.push_back(onHost(*buffer));
      state_data.push_back(state.back().data());
    }
    const std::vector<float> decay_flags = parts.optimizer->decayMask().flags(replicas.store().size());
    shards_->init(params.data(), state_data, decay_flags.data(), parts.updates_done);
  }
  workers_->barrier();  // nobody pushes before the shards hold the chief's state
}

std::string ParameterServerStrategy::describeRun() const {
  std::string updates = "synchronous updates";
  if (!gradients_described_.empty()) updates += ", gradients pushed " + gradients_described_;
  if (consistency_ == "async") updates = "asynchronous updates";
  if (consistency_ == "bounded")
    updates = "updates at most " + std::to_string(local_->parts().job->strategy.staleness) +
              " ahead of the slowest worker";
  if (shards_ && shards_->sharedShards() > 0)
    updates += ", " + std::to_string(shards_->sharedShards()) + " shard(s) reached through shared memory";
  return " per worker, " + std::to_string(worldSize()) + " workers, parameters on " +
         std::to_string(endpoints_.size()) + " shard(s), " + updates;
}

StepFigures ParameterServerStrategy::step(const StepInput& in) {
  if (!local_) throw Error("parameter_server: step before attach");
  // Synchronised statistics need samples in every worker's every micro-batch.
  if (syncsBatchStats() && in.batch.global_size < worldSize() * local_->parts().job->train.accumulate)
    return StepFigures{};
  if (slow_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms_));
  const int64_t batch = in.update - 1;  // each step is one global batch
  if (lockstep()) return stepTogether(in, batch);
  BatchFigures f;
  // Losses announced since the last step: their slices of the batches
  // already stepped are caught up on first.
  f += takeOverLosses(batch - 1, in.lr, false);
  f += computeAndPush(in, batch, rank());
  for (int slice : handover_.inherited(rank(), batch)) f += pushTakenOver(batch, slice, in.lr);
  last_batch_ = batch;
  last_lr_ = in.lr;
  StepFigures out{f, false, measuredFigures()};
  if (local_->onDevice()) {
    local_->parts().replicas->snapshotDeviceFigures();
    out.host = BatchFigures{};
    out.on_device = true;
  }
  return out;
}

BatchFigures ParameterServerStrategy::computeAndPush(const StepInput& in, int64_t batch, int slice) {
  const TrainingParts& parts = local_->parts();
  ReplicaSet& replicas = *parts.replicas;
  const BatchFigures f = local_->computeGradients(in, nullptr);
  local_->sumReplicas();
  // Asynchronous pushes are clipped each on its own, to the share of the norm
  // one worker's part of a global batch stands for.
  const double clip_norm = parts.job->train.grad_clip_norm;
  if (clip_norm > 0) local_->clip(clip_norm / worldSize());
  PhaseSpan span(parts.profile, DevicePhase::Communication);
  ParamStore& store = replicas.store();
  ++pushes_;
  if (local_->onDevice()) {
    const Tensor grads = replicas.grads().to(Device::cpu());
    Tensor params = Tensor::empty(store.params().shape(), Device::cpu());
    shards_->pushAndPull(pushes_, in.lr, grads.data(), params.data(), batch, slice);
    store.params().copyFrom(params);
    replicas.grads().zero();
  } else {
    shards_->pushAndPullClearing(pushes_, in.lr, replicas.grads().data(), store.params().data(), batch,
                                 slice);
  }
  return f;
}

const Batch& ParameterServerStrategy::readSlice(int64_t batch, int slice) {
  const TrainingParts& parts = local_->parts();
  std::unique_ptr<BatchLoader>& loader = slice_loaders_[slice];
  if (!loader) loader = parts.slice_loader(Shard{slice, worldSize()});
  const int64_t epoch = batch / parts.batches_per_epoch;
  const int64_t in_epoch = batch % parts.batches_per_epoch;
  loader->start(epoch, in_epoch * parts.job->train.updateBatch());
  if (!loader->next(slice_data_))
    throw Error("parameter_server: worker " + std::to_string(slice) + "'s slice of global batch " +
                std::to_string(batch) + " is past the end of its epoch");
  return slice_data_;
}

BatchFigures ParameterServerStrategy::pushTakenOver(int64_t batch, int slice, double lr) {
  const uint64_t seed = dropoutSeedOf(local_->parts().job->job.seed, batch);
  return computeAndPush(StepInput{readSlice(batch, slice), lr, batch + 1, seed}, batch, slice);
}

StepFigures ParameterServerStrategy::stepTogether(const StepInput& in, int64_t batch) {
  const TrainingParts& parts = local_->parts();
  ReplicaSet& replicas = *parts.replicas;
  ParamStore& store = replicas.store();
  together_batch_ = batch;
  together_lr_ = in.lr;
  pushed_in_place_.clear();
  ++pushes_;
  pushOwnSlice(in, batch);
  // Slices of workers lost before this step, then of those lost while the
  // answer is awaited (the update waits for them).
  takeInLossesTogether(false);
  pushInPlace();
  {
    PhaseSpan span(parts.profile, DevicePhase::Communication);
    auto while_waiting = [this] {
      const bool lost = takeInLossesTogether(true);
      return pushInPlace() || lost;
    };
    if (local_->onDevice()) {
      Tensor params = Tensor::empty(store.params().shape(), Device::cpu());
      shards_->pull(pushes_, in.lr, params.data(), while_waiting);
      store.params().copyFrom(params);
    } else {
      shards_->pull(pushes_, in.lr, store.params().data(), while_waiting);
    }
  }
  replicas.grads().zero();
  last_batch_ = batch;
  last_lr_ = in.lr;
  const ps::SliceFigures& all = shards_->answeredFigures();
  StepFigures out;
  out.host = BatchFigures{all.loss_sum, static_cast<int64_t>(all.correct), static_cast<int64_t>(all.samples)};
  out.agreed = true;
  out.stop = all.stop;
  out.extra = measuredFigures();
  settleLossScale(parts, in, all.overflows == 0,
                  out);  // the shards skipped an update any slice overflowed in
  return out;
}

BatchFigures ParameterServerStrategy::slicesFigures() {
  // On a GPU the figures are summed on the device: taken now, as the
  // gradients' copy to the host has waited for the device already.
  ReplicaSet& replicas = *local_->parts().replicas;
  replicas.snapshotDeviceFigures();
  return replicas.takeDeviceFigures();
}

void ParameterServerStrategy::pushOwnSlice(const StepInput& in, int64_t batch) {
  ReplicaSet& replicas = *local_->parts().replicas;
  if (gradients_) {  // on the CPU: in parts during backward
    part_lr_ = in.lr;
    const BatchFigures f = gradients_->compute(in);
    shards_->finishParts(pushes_, in.lr, replicas.grads().data(), sliceFiguresOf(f, in.stop));
    return;
  }
  computeWholeAndPush(in, batch, rank());
}

void ParameterServerStrategy::computeWholeAndPush(const StepInput& in, int64_t batch, int slice) {
  ReplicaSet& replicas = *local_->parts().replicas;
  const BatchFigures f = local_->computeGradients(in, nullptr);
  local_->sumReplicas();
  if (!local_->onDevice()) {
    ps::SliceFigures figures = sliceFiguresOf(f, in.stop);
    figures.overflows = unscaleForPush(replicas.grads()) ? 0 : 1;
    shards_->push(pushes_, in.lr, replicas.grads().data(), batch, slice, figures);
    return;
  }
  // This worker's own slice is sent again from here if no answer comes (a
  // lost worker's, pushed after it, is copied by the push). fp16 on a GPU:
  // unscaled (and its overflow told) on the host copy, as the CPU's pushes are.
  host_grads_ = replicas.grads().to(Device::cpu());
  ps::SliceFigures figures = sliceFiguresOf(slicesFigures(), in.stop);
  figures.overflows = unscaleForPush(host_grads_) ? 0 : 1;
  shards_->push(pushes_, in.lr, host_grads_.data(), batch, slice, figures);
}

bool ParameterServerStrategy::unscaleForPush(Tensor& grads) {
  const TrainingParts& parts = local_->parts();
  if (!lossScaled(parts)) return true;
  const bool finite = std::isfinite(sumOfSquares(grads.data(), 0, grads.numel()));
  scale(grads.data(), 0, grads.numel(), parts.loss_scaler->unscaleFactor());
  return finite;
}

bool ParameterServerStrategy::pushInPlace() {
  bool pushed = false;
  for (int slice : handover_.inherited(rank(), together_batch_)) {
    if (!pushed_in_place_.insert(slice).second) continue;
    ReplicaSet& replicas = *local_->parts().replicas;
    shards_->keepOwnPush();  // this slice's gradients overwrite this worker's own
    replicas.grads().zero();
    const uint64_t seed = dropoutSeedOf(local_->parts().job->job.seed, together_batch_);
    computeWholeAndPush(StepInput{readSlice(together_batch_, slice), together_lr_, together_batch_ + 1, seed},
                        together_batch_, slice);
    pushed = true;
  }
  return pushed;
}

bool ParameterServerStrategy::takeInLossesTogether(bool poll) {
  if (!poll && shards_->liveWorkers() >= worldSize() - handover_.losses()) return false;
  const auto now = std::chrono::steady_clock::now();
  if (poll && now - last_loss_poll_ < std::chrono::milliseconds(200)) return false;
  last_loss_poll_ = now;
  bool fresh = false;
  for (const LostRank& lost : readLostRanks(*store_)) {
    if (lost.rank >= worldSize() || handover_.isLost(lost.rank)) continue;  // a shard's rank, or known
    // Every slice up to the update under way was applied: the update waits
    // for this one, and no worker got past it. (A worker that learns of the
    // loss a step later, the update having come whole, agrees on the owners
    // of every slice still to come: they do not depend on where it learnt.)
    DoneSlices done;
    done.own_upto = together_batch_ - 1;
    handover_.lose(lost.rank, done);
    fresh = true;
    if (isChief() && local_->parts().say)
      local_->parts().say("parameter server: lost worker " + std::to_string(lost.rank) + " (host " +
                          lost.host + ") during global batch " + std::to_string(together_batch_) + "; " +
                          std::to_string(worldSize() - handover_.losses()) +
                          " workers compute its slices from there on (the global batch stays " +
                          std::to_string(local_->parts().job->train.updateBatch()) + ")");
  }
  return fresh;
}

BatchFigures ParameterServerStrategy::takeOverLosses(int64_t upto, double lr, bool poll) {
  BatchFigures f;
  // A shard's answer says a worker was lost before the store is asked.
  if (!poll && shards_->liveWorkers() >= worldSize() - handover_.losses()) return f;
  const int first_new = handover_.losses();
  const auto timeout = secondsToMillis(timeout_s_);
  for (const LostRank& lost : readLostRanks(*store_)) {
    if (lost.rank >= worldSize() || handover_.isLost(lost.rank)) continue;  // a shard's rank, or known
    // What its pushes covered, over every shard (each publishes once it has dropped it).
    DoneSlices done;
    for (int s = 0; s < shards_->shards(); ++s) {
      const Bytes text = store_->get(doneSlicesKey(lost.rank, s), timeout);
      DoneSlices shard_done;
      if (!DoneSlices::parse(std::string(text.begin(), text.end()), shard_done))
        throw CommError("parameter-server shard " + std::to_string(s) +
                        " published an unreadable account of lost worker " + std::to_string(lost.rank));
      done.merge(shard_done);
    }
    handover_.lose(lost.rank, done);
    if (isChief() && local_->parts().say)
      local_->parts().say("parameter server: lost worker " + std::to_string(lost.rank) + " (host " +
                          lost.host + ") after its slice of global batch " + std::to_string(done.own_upto) +
                          "; " + std::to_string(worldSize() - handover_.losses()) +
                          " workers take over the rest of its samples");
  }
  for (const auto& [batch, slice] : handover_.handedOver(rank(), first_new, upto))
    f += pushTakenOver(batch, slice, lr);
  return f;
}

void ParameterServerStrategy::drainUpdates() {
  if (lockstep() || drained_ || !shards_) return;
  drained_ = true;
  meetAtEnd(true);
}

void ParameterServerStrategy::meetAtEnd(bool take_over) {
  const std::string drained_key = "parameter_server/drained";
  auto doneKey = [](int r) { return "parameter_server/finished/" + std::to_string(r); };
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + secondsToMillis(timeout_s_);
  int said = -1, done_seen = 0;
  for (;;) {
    // A worker lost now still hands its undone slices to those still here
    // (sync: every slice of every update is in; only the count matters).
    if (take_over)
      takeOverLosses(last_batch_, last_lr_, true);
    else
      takeInLossesTogether(true);
    const int losses = handover_.losses();
    if (losses != said) {  // done with the slices of every loss known so far
      const std::string v = std::to_string(losses);
      store_->set(doneKey(rank()), Bytes(v.begin(), v.end()));
      said = losses;
      deadline = Clock::now() + secondsToMillis(timeout_s_);
    }
    if (isChief()) {
      // Done when every worker not lost is done with the same losses.
      int done = 0, live = 0;
      for (int r = 1; r < worldSize(); ++r) {
        if (handover_.isLost(r)) continue;
        ++live;
        if (!store_->check(doneKey(r))) continue;
        const Bytes v = store_->get(doneKey(r), std::chrono::seconds(1));
        if (std::string(v.begin(), v.end()) == std::to_string(losses)) ++done;
      }
      if (done == live) {
        store_->set(drained_key, Bytes{1});
        // The final evaluation is of the model every worker's updates made,
        // the one the final checkpoint holds, not of the chief's last pull.
        if (take_over) collectState(local_->parts().replicas->store(), *local_->parts().optimizer);
        return;
      }
      if (done != done_seen) {  // the deadline is for one worker at a time
        done_seen = done;
        deadline = Clock::now() + secondsToMillis(timeout_s_);
      }
    } else if (store_->check(drained_key)) {
      return;
    }
    if (Clock::now() > deadline)
      throw CommError("parameter server: the workers did not all finish their updates within " +
                      std::to_string(static_cast<int>(timeout_s_)) + " s ([cluster] collective_timeout_s)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::pair<std::string, double>> ParameterServerStrategy::measuredFigures() const {
  const std::vector<ShardClients::ShardStep>& shards = shards_->lastStep();
  int64_t max_staleness = 0, sum = 0;
  for (const auto& s : shards) {
    max_staleness = std::max(max_staleness, s.staleness);
    sum += s.staleness;
  }
  std::vector<std::pair<std::string, double>> out = {
      {"staleness_max", static_cast<double>(max_staleness)},
      {"staleness_mean",
       shards.empty() ? 0.0 : static_cast<double>(sum) / static_cast<double>(shards.size())}};
  for (size_t s = 0; s < shards.size(); ++s) {
    out.emplace_back("shard" + std::to_string(s) + "_bytes", static_cast<double>(shards[s].bytes));
    out.emplace_back("shard" + std::to_string(s) + "_requests_per_s", shards[s].requests_per_s);
  }
  return out;
}

void ParameterServerStrategy::agreeOnBuffers(ParamStore& buffers) {
  if (!lockstep()) return;  // the chief's own are saved
  if (syncsBatchStats() || worldSize() == 1 || buffers.size() == 0) return;
  // Averaged over the workers not lost, through the store: a collective of
  // the workers would wait for a lost one for ever.
  const int64_t round = ++buffer_rounds_;
  auto key = [round](int r) {
    return "parameter_server/buffers/" + std::to_string(round) + "/" + std::to_string(r);
  };
  Tensor host = buffers.params().to(Device::cpu());
  const auto bytes = static_cast<size_t>(host.numel()) * sizeof(float);
  const auto* mine = reinterpret_cast<const uint8_t*>(host.data());
  store_->set(key(rank()), Bytes(mine, mine + bytes));
  std::vector<double> sums(static_cast<size_t>(host.numel()), 0.0);
  int counted = 0;
  using Clock = std::chrono::steady_clock;
  for (int r = 0; r < worldSize(); ++r) {
    const auto deadline = Clock::now() + secondsToMillis(timeout_s_);
    while (!handover_.isLost(r) && !store_->check(key(r))) {
      if (Clock::now() > deadline)
        throw CommError("parameter server: worker " + std::to_string(r) +
                        " did not share its batch-norm statistics within " +
                        std::to_string(static_cast<int>(timeout_s_)) + " s ([cluster] collective_timeout_s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      takeInLossesTogether(true);
    }
    if (handover_.isLost(r) && !store_->check(key(r))) continue;
    Bytes theirs;
    const float* v = host.data();
    if (r != rank()) {
      theirs = store_->get(key(r), secondsToMillis(timeout_s_));
      if (theirs.size() != bytes)
        throw CommError("parameter server: worker " + std::to_string(r) + " shared " +
                        std::to_string(theirs.size()) + " bytes of batch-norm statistics for " +
                        std::to_string(bytes) +
                        "; start every worker from the same job file and dtrain build");
      v = reinterpret_cast<const float*>(theirs.data());
    }
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += v[i];
    ++counted;
  }
  for (size_t i = 0; i < sums.size(); ++i) host.data()[i] = static_cast<float>(sums[i] / counted);
  buffers.params().copyFrom(host);
}

void ParameterServerStrategy::collectState(ParamStore& params, Optimizer& optimizer) {
  if (!shards_) return;
  Tensor host_params = Tensor::empty(params.params().shape(), Device::cpu());
  std::vector<Tensor> state;
  std::vector<float*> state_data;
  auto buffers = optimizer.stateBuffers();
  for (auto& [name, buffer] : buffers) {
    state.push_back(Tensor::empty(buffer->shape(), Device::cpu()));
    state_data.push_back(state.back().data());
  }
  shards_->gather(host_params.data(), state_data);
  params.params().copyFrom(host_params);
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second->copyFrom(state[i]);
}

void ParameterServerStrategy::finish() {
  if (finished_ || !shards_) return;
  finished_ = true;
  // Every worker's last push is answered. The workers meet through the
  // store, which survives a lost worker; the collectives would not.
  if (lockstep())
    meetAtEnd(false);
  else
    drainUpdates();
  if (isChief()) shards_->stop();
}

}  // namespace dtrain
