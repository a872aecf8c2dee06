#include "core/bench/allreduce_timing.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/errors.h"

namespace dtrain {
namespace {

// The element pattern repeats with a prime period, so a chunk delivered to
// the wrong offset (chunk sizes are powers of two or divide the buffer
// evenly) lands on different values.
constexpr int64_t kPeriod = 1021;

float base(int rank, int round) { return static_cast<float>(1024 * rank + 37 * round); }

void fill(float* data, int64_t n, int rank, int round) {
  const float b = base(rank, round);
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    data[i] = b + static_cast<float>(m);
    if (++m == kPeriod) m = 0;
  }
}

// -1 when every element is the expected sum; otherwise the first that is not.
int64_t firstWrong(const float* data, int64_t n, int size, int round) {
  float b = 0;
  for (int r = 0; r < size; ++r) b += base(r, round);
  const float per_element = static_cast<float>(size);
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (data[i] != b + per_element * static_cast<float>(m)) return i;
    if (++m == kPeriod) m = 0;
  }
  return -1;
}

}  // namespace

float allReduceTimingValue(int rank, int64_t i, int round) {
  return base(rank, round) + static_cast<float>(i % kPeriod);
}

float allReduceTimingSum(int size, int64_t i, int round) {
  float sum = 0;
  for (int r = 0; r < size; ++r) sum += allReduceTimingValue(r, i, round);
  return sum;
}

double AllReduceTiming::median() const {
  if (seconds.empty()) return 0.0;
  std::vector<double> s = seconds;
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
}

double AllReduceTiming::min() const {
  return seconds.empty() ? 0.0 : *std::min_element(seconds.begin(), seconds.end());
}

double AllReduceTiming::max() const {
  return seconds.empty() ? 0.0 : *std::max_element(seconds.begin(), seconds.end());
}

AllReduceTiming timeAllReduce(ProcessGroup& group, const AllReduceTimingOptions& options) {
  if (options.elements < 1)
    throw ConfigError("all-reduce timing needs at least 1 element (got " + std::to_string(options.elements) +
                      ")");
  if (options.iters < 1 || options.warmup < 0 || options.warmup + options.iters > kAllReduceTimingMaxRounds)
    throw ConfigError("all-reduce timing: iters must be >= 1 and warmup >= 0, with at most " +
                      std::to_string(kAllReduceTimingMaxRounds) + " rounds in all (got " +
                      std::to_string(options.warmup) + " + " + std::to_string(options.iters) + ")");
  if (group.size() > kAllReduceTimingMaxRanks)
    throw ConfigError("all-reduce timing supports at most " + std::to_string(kAllReduceTimingMaxRanks) +
                      " ranks (got " + std::to_string(group.size()) + ")");
  const int rank = group.rank(), size = group.size();
  std::vector<float> data(static_cast<size_t>(options.elements));
  AllReduceTiming timing;
  for (int round = 0; round < options.warmup + options.iters; ++round) {
    fill(data.data(), options.elements, rank, round);
    group.barrier();  // start together: a late peer's wait is not the collective's time
    auto start = std::chrono::steady_clock::now();
    group.allReduceSum(data.data(), options.elements);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t wrong = firstWrong(data.data(), options.elements, size, round);
    if (wrong >= 0)
      throw CommError("all-reduce gave a wrong sum on rank " + std::to_string(rank) + " in round " +
                      std::to_string(round) + ": element " + std::to_string(wrong) + " is " +
                      std::to_string(data[static_cast<size_t>(wrong)]) + ", expected " +
                      std::to_string(allReduceTimingSum(size, wrong, round)) + " (" + group.describe() + ")");
    if (round >= options.warmup) timing.seconds.push_back(took);
  }
  return timing;
}

}  // namespace dtrain
