// Hears when each layer's forward and backward begin and end, so
// `dtrain bench step` can say where a step's time goes. Model calls it around
// every layer that computes (aliased layers, fused away, are not timed). On a
// GPU the implementation records events on the device's stream instead of
// reading a clock, since the host only queues the work.
#pragma once

namespace dtrain {

class LayerTimer {
 public:
  virtual ~LayerTimer() = default;
  virtual void begin(int node, bool backward) = 0;
  virtual void end(int node, bool backward) = 0;
};

}  // namespace dtrain
