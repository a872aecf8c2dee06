#include "core/train/step_profile.h"

#include <chrono>

namespace dtrain {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void StepProfile::attach(const Model& model, Device device, const std::string& device_name) {
  model_ = &model;
  device_name_ = device_name;
  nodes_ = static_cast<int>(model.nodes().size());
  clock_ = SpanClock::make(device);
}

void StepProfile::addWait(HostWait w, double seconds) {
  if (steps_seen_ >= warmup_) waits_[static_cast<int>(w)] += seconds;
}

void StepProfile::stepDone(int64_t samples) {
  ++steps_seen_;
  if (steps_seen_ <= warmup_) {
    if (steps_seen_ == warmup_) clock_->read();  // the warm-up's queued work drains here, uncounted
    return;
  }
  ++counted_;
  samples_ += samples;
  if (samples > batch_) batch_ = samples;
}

void StepProfile::stepBegins() {
  if (steps_seen_ == warmup_ && counted_ == 0) started_ = now();
}

StepReport StepProfile::finish() {
  StepReport r;
  r.device = device_name_;
  r.warmup = warmup_;
  r.steps = counted_;
  r.batch = batch_;
  if (!clock_ || counted_ == 0) return r;
  const std::vector<double> totals = clock_->read();  // waits for the device: the last step's end
  const double wall = now() - started_;
  const double per = 1.0 / static_cast<double>(counted_);
  auto total = [&](int slot) {
    return static_cast<size_t>(slot) < totals.size() ? totals[static_cast<size_t>(slot)] : 0.0;
  };
  r.step_s = wall * per;
  r.images_per_s = wall > 0 ? static_cast<double>(samples_) / wall : 0;
  for (int i = 0; i < nodes_; ++i) {
    const double f = total(layerSlot(i, false)) * per, b = total(layerSlot(i, true)) * per;
    if (model_->aliasOf(i) >= 0) continue;  // fused into its producer: timed there
    const Model::Node& node = model_->nodes()[static_cast<size_t>(i)];
    LayerTiming t;
    t.name = node.layer->name();
    t.type = node.layer->type();
    t.algorithm = node.layer->algorithmName(batch_);
    t.forward_s = f;
    t.backward_s = b;
    r.forward_s += f;
    r.backward_s += b;
    r.layers.push_back(std::move(t));
  }
  r.copy_s = total(phaseSlot(DevicePhase::Copy)) * per;
  r.loss_s = total(phaseSlot(DevicePhase::Loss)) * per;
  r.optimizer_s = total(phaseSlot(DevicePhase::Optimizer)) * per;
  r.communication_s = total(phaseSlot(DevicePhase::Communication)) * per;
  r.data_wait_s = waits_[static_cast<int>(HostWait::Data)] * per;
  r.host_idle_s = waits_[static_cast<int>(HostWait::Device)] * per;
  return r;
}

}  // namespace dtrain
