// Times spans of a compute device's work, for `dtrain bench step`: on the
// CPU by the wall clock around the work, on a GPU by events recorded on the
// device's compute stream around the queued work (the host only queues it,
// so its clock would time the queueing). Spans are read once, at the end,
// so measuring adds no wait for the device inside the measured steps.
#pragma once
#include <memory>
#include <vector>

#include "core/tensor/tensor.h"

namespace dtrain {

class SpanClock {
 public:
  virtual ~SpanClock() = default;
  // For `device` (a GPU's loads the CUDA backend; throws DeviceError as it does).
  static std::unique_ptr<SpanClock> make(Device device);

  // Marks the beginning and end of one span of slot `slot` (>= 0); spans of
  // a slot must not nest.
  virtual void begin(int slot) = 0;
  virtual void end(int slot) = 0;
  // Waits for the device and returns the seconds of the spans marked since
  // the last read, summed per slot (index = slot), and forgets them.
  virtual std::vector<double> read() = 0;
};

}  // namespace dtrain
