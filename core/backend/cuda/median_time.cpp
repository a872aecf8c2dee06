#include "core/backend/cuda/median_time.h"

#include <algorithm>
#include <vector>

namespace dtrain {

namespace {

// Timing events, destroyed with the object (errors ignored: a failing device
// has failed the search already).
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  bool ok = false;
  EventPair() { ok = cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess; }
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double medianMilliseconds(cudaStream_t stream, int runs, const std::function<bool()>& queue) {
  EventPair events;
  if (!events.ok) {
    cudaGetLastError();
    return -1;
  }
  if (!queue() || cudaStreamSynchronize(stream) != cudaSuccess) {  // the warm-up
    cudaGetLastError();
    return -1;
  }
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    float ms = 0;
    if (cudaEventRecord(events.start, stream) != cudaSuccess || !queue() ||
        cudaEventRecord(events.stop, stream) != cudaSuccess ||
        cudaEventSynchronize(events.stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, events.start, events.stop) != cudaSuccess) {
      cudaGetLastError();
      cudaStreamSynchronize(stream);
      return -1;
    }
    times.push_back(ms);
  }
  return median(times);
}

}  // namespace dtrain
