#include "core/backend/cuda/event_span_clock.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/device_waits.h"
#include "core/errors.h"

namespace dtrain {

EventSpanClock::EventSpanClock(CudaContext& ctx) : ctx_(ctx) {}

EventSpanClock::~EventSpanClock() {
  releaseAll();
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t EventSpanClock::takeEvent() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  checkCuda(cudaEventCreate(&e), "create a timing event");  // with timing: the default flags
  return e;
}

void EventSpanClock::begin(int slot) {
  if (static_cast<size_t>(slot) >= open_.size()) open_.resize(static_cast<size_t>(slot) + 1, -1);
  Span s{slot, takeEvent(), takeEvent()};
  checkCuda(cudaEventRecord(s.begin, ctx_.stream()), "record a timing event");
  open_[static_cast<size_t>(slot)] = static_cast<int>(spans_.size());
  spans_.push_back(s);
}

void EventSpanClock::end(int slot) {
  if (static_cast<size_t>(slot) >= open_.size() || open_[static_cast<size_t>(slot)] < 0)
    throw Error("EventSpanClock::end without begin for slot " + std::to_string(slot));
  Span& s = spans_[static_cast<size_t>(open_[static_cast<size_t>(slot)])];
  checkCuda(cudaEventRecord(s.end, ctx_.stream()), "record a timing event");
  open_[static_cast<size_t>(slot)] = -1;
}

void EventSpanClock::releaseAll() {
  for (const Span& s : spans_) {
    free_.push_back(s.begin);
    free_.push_back(s.end);
  }
  spans_.clear();
  open_.assign(open_.size(), -1);
}

std::vector<double> EventSpanClock::read() {
  std::vector<double> totals(open_.size(), 0.0);
  if (!spans_.empty()) {
    noteDeviceWait();
    checkCuda(cudaEventSynchronize(spans_.back().end), "wait for the timed work");
  }
  for (const Span& s : spans_) {
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, s.begin, s.end), "read a timing event");
    totals[static_cast<size_t>(s.slot)] += ms / 1000.0;
  }
  releaseAll();
  return totals;
}

}  // namespace dtrain
