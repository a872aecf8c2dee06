#include "core/backend/span_clock.h"

#include <chrono>

#include "core/backend/cuda_module.h"

namespace dtrain {

namespace {

class WallSpanClock final : public SpanClock {
 public:
  void begin(int slot) override {
    grow(slot);
    started_[static_cast<size_t>(slot)] = Clock::now();
  }
  void end(int slot) override {
    grow(slot);
    totals_[static_cast<size_t>(slot)] +=
        std::chrono::duration<double>(Clock::now() - started_[static_cast<size_t>(slot)]).count();
  }
  std::vector<double> read() override {
    std::vector<double> out = totals_;
    totals_.assign(totals_.size(), 0.0);
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  void grow(int slot) {
    if (static_cast<size_t>(slot) >= totals_.size()) {
      totals_.resize(static_cast<size_t>(slot) + 1, 0.0);
      started_.resize(static_cast<size_t>(slot) + 1);
    }
  }
  std::vector<double> totals_;
  std::vector<Clock::time_point> started_;
};

}  // namespace

std::unique_ptr<SpanClock> SpanClock::make(Device device) {
  if (device.isCpu()) return std::make_unique<WallSpanClock>();
  return cudaBackend(device).spanClock(device.index);
}

}  // namespace dtrain
