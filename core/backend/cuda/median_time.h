// Times GPU work the way algorithm searches need: one untimed warm-up run
// (first-launch costs, caches), then each run between two timing events on
// the stream, and the median, which one slow outlier (a clock change, another
// process) cannot move. Synchronises the stream; for one-off searches only.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace dtrain {

// The median of `runs` timings, in milliseconds, of the work `queue` puts on
// `stream`; negative when `queue` reports a failure (returns false) or a
// timing event fails, leaving the device usable.
double medianMilliseconds(cudaStream_t stream, int runs, const std::function<bool()>& queue);

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> values);

}  // namespace dtrain
