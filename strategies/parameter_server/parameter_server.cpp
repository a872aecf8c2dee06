#include "strategies/parameter_server/parameter_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "core/errors.h"
#include "core/optim/optimizer.h"
#include "core/train/step_profile.h"
#include "strategies/batch_norm_across_workers.h"

namespace dtrain {

namespace {

// A device buffer's host copy, or the buffer itself on the CPU.
Tensor onHost(const Tensor& t) { return t.device().isCpu() ? t : t.to(Device::cpu()); }

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(std::shared_ptr<ProcessGroup> workers,
                                                 std::vector<std::string> shard_endpoints,
                                                 uint64_t generation, double timeout_s,
                                                 std::string consistency)
    : workers_(std::move(workers)),
      endpoints_(std::move(shard_endpoints)),
      generation_(generation),
      timeout_s_(timeout_s),
      consistency_(std::move(consistency)) {
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
  if (syncsBatchStats()) sumBatchStatsOver(*workers_, replicas);
  placement_ = placeVariables(replicas.store(), static_cast<int>(endpoints_.size()));
  if (isChief() && parts.say)
    for (const std::string& line : describePlacement(placement_, false))
      parts.say("parameter server: " + line);
  shards_ = std::make_unique<ShardClients>(endpoints_, placement_, rank(), generation_, timeout_s_);
  shards_->startAt(parts.updates_done);
  if (isChief()) {
    // The shards start from the chief's state: fresh, or its checkpoint's.
    const Tensor params = onHost(replicas.store().params());
    std::vector<Tensor> state;
    std::vector<const float*> state_data;
    for (auto& [name, buffer] : parts.optimizer->stateBuffers()) {
      state.push_back(onHost(*buffer));
      state_data.push_back(state.back().data());
    }
    shards_->init(params.data(), state_data, parts.updates_done);
  }
  workers_->barrier();  // nobody pushes before the shards hold the chief's state
}

std::string ParameterServerStrategy::describeRun() const {
  std::string updates = "synchronous updates";
  if (consistency_ == "async") updates = "asynchronous updates";
  if (consistency_ == "bounded")
    updates = "updates at most " + std::to_string(local_->parts().job->strategy.staleness) +
              " ahead of the slowest worker";
  return " per worker, " + std::to_string(worldSize()) + " workers, parameters on " +
         std::to_string(endpoints_.size()) + " shard(s), " + updates;
}

StepFigures ParameterServerStrategy::step(const StepInput& in) {
  if (!local_) throw Error("parameter_server: step before attach");
  if (syncsBatchStats() && in.batch.global_size < worldSize()) return StepFigures{};
  const TrainingParts& parts = local_->parts();
  ReplicaSet& replicas = *parts.replicas;
  if (slow_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms_));
  const BatchFigures f = local_->computeGradients(in, nullptr);
  local_->sumReplicas();
  // Asynchronous pushes are clipped each on its own, to the share of the norm
  // one worker's part of a global batch stands for.
  const double clip_norm = parts.job->train.grad_clip_norm;
  if (clip_norm > 0 && consistency_ != "sync") local_->clip(clip_norm / worldSize());
  {
    PhaseSpan span(parts.profile, DevicePhase::Communication);
    ParamStore& store = replicas.store();
    if (local_->onDevice()) {
      const Tensor grads = replicas.grads().to(Device::cpu());
      Tensor params = Tensor::empty(store.params().shape(), Device::cpu());
      shards_->pushAndPull(in.update, in.lr, grads.data(), params.data());
      store.params().copyFrom(params);
    } else {
      shards_->pushAndPull(in.update, in.lr, replicas.grads().data(), store.params().data());
    }
    replicas.grads().zero();
  }
  StepFigures out{f, false, measuredFigures()};
  if (local_->onDevice()) {
    replicas.snapshotDeviceFigures();
    out.host = BatchFigures{};
    out.on_device = true;
  }
  return out;
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
  averageBuffers(*workers_, buffers, syncsBatchStats());
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
  workers_->barrier();  // every worker's last push is answered
  if (isChief()) shards_->stop();
}

}  // namespace dtrain
