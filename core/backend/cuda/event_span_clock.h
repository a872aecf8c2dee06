// SpanClock on a GPU (core/backend/span_clock.h): a pair of timing events
// recorded on the compute stream around each span, read at the end.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/backend/span_clock.h"

namespace dtrain {

class CudaContext;

class EventSpanClock final : public SpanClock {
 public:
  explicit EventSpanClock(CudaContext& ctx);
  ~EventSpanClock() override;

  void begin(int slot) override;
  void end(int slot) override;
  std::vector<double> read() override;

 private:
  struct Span {
    int slot;
    cudaEvent_t begin;
    cudaEvent_t end;
  };
  cudaEvent_t takeEvent();
  void releaseAll();

  CudaContext& ctx_;
  std::vector<Span> spans_;       // marked since the last read, in order
  std::vector<int> open_;         // per slot: index in spans_ of its open span, or -1
  std::vector<cudaEvent_t> free_;  // events to reuse (recorded ones only once read)
};

}  // namespace dtrain
