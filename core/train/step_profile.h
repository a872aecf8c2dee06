// Where a training step's time goes (`dtrain bench step`): each layer's
// forward and backward, the batch's copy to the device, the loss, the
// optimizer update and the communication, timed on the device that does
// the work (CUDA events on a GPU, the wall clock on the CPU), and the host's
// own waits: for the loader's next batch, and for the device (host idle).
//
// The trainer, given a profile (TrainerOptions::profile), attaches it once
// its model exists and marks the spans; replica 0's layers are timed (on the
// CPU the other compute threads run their slices alongside). The first
// `warmup` steps are not counted. Not thread-safe: the trainer's thread and
// replica 0's compute thread use it one after the other within a step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/span_clock.h"
#include "core/nn/layer_timer.h"
#include "core/nn/model.h"

namespace dtrain {

// Spans timed on the computing device.
enum class DevicePhase { Copy, Loss, Optimizer, Communication, kCount };
// Time the host spends waiting.
enum class HostWait { Data, Device, kCount };

struct LayerTiming {
  std::string name, type, algorithm;
  double forward_s = 0, backward_s = 0;  // per step
};

struct StepReport {
  std::string device;
  int64_t steps = 0, warmup = 0, batch = 0;
  double step_s = 0;  // wall time per step
  double images_per_s = 0;
  double forward_s = 0, backward_s = 0;  // per step, all layers
  double copy_s = 0, loss_s = 0, optimizer_s = 0, communication_s = 0;
  double data_wait_s = 0, host_idle_s = 0;
  std::vector<LayerTiming> layers;  // the layers that compute, in model order
};

class StepProfile final : public LayerTimer {
 public:
  explicit StepProfile(int64_t warmup) : warmup_(warmup) {}

  // Called by the trainer once the model exists.
  void attach(const Model& model, Device device, const std::string& device_name);

  void begin(int node, bool backward) override { clock_->begin(layerSlot(node, backward)); }
  void end(int node, bool backward) override { clock_->end(layerSlot(node, backward)); }
  void beginPhase(DevicePhase p) { clock_->begin(phaseSlot(p)); }
  void endPhase(DevicePhase p) { clock_->end(phaseSlot(p)); }
  void addWait(HostWait w, double seconds);
  // Before each step's batch is asked for: the first counted step starts the clock.
  void stepBegins();
  // After each step's update is queued: counts it (or, at the end of the
  // warm-up, waits for the device and forgets the spans so far).
  void stepDone(int64_t samples);
  // Waits for the device and sums up the counted steps.
  StepReport finish();

 private:
  int layerSlot(int node, bool backward) const { return 2 * node + (backward ? 1 : 0); }
  int phaseSlot(DevicePhase p) const { return 2 * nodes_ + static_cast<int>(p); }

  int64_t warmup_;
  const Model* model_ = nullptr;
  std::string device_name_;
  int nodes_ = 0;
  std::unique_ptr<SpanClock> clock_;
  int64_t steps_seen_ = 0, counted_ = 0, samples_ = 0, batch_ = 0;
  double waits_[static_cast<int>(HostWait::kCount)] = {};
  double started_ = 0;  // steady-clock seconds when the first counted step began
};

// A span of a step phase on the profile's device clock, when profiling.
class PhaseSpan {
 public:
  PhaseSpan(StepProfile* profile, DevicePhase phase) : profile_(profile), phase_(phase) {
    if (profile_) profile_->beginPhase(phase_);
  }
  ~PhaseSpan() {
    try {
      if (profile_) profile_->endPhase(phase_);
    } catch (...) {  // a failing device already failed the step; the measurement is lost anyway
    }
  }
  PhaseSpan(const PhaseSpan&) = delete;
  PhaseSpan& operator=(const PhaseSpan&) = delete;

 private:
  StepProfile* profile_;
  DevicePhase phase_;
};

}  // namespace dtrain
