#include "core/train/batch_stats_reducer.h"

#include <algorithm>

#include "core/errors.h"

namespace dtrain {

BatchStatsReducer::BatchStatsReducer(int replicas, RankSum rank_sum)
    : rank_sum_(std::move(rank_sum)), slots_(static_cast<size_t>(replicas)) {
  for (int i = 0; i < replicas; ++i) views_.emplace_back(this, i);
  taking_part_.assign(static_cast<size_t>(replicas), true);
  participants_ = replicas;
}

void BatchStatsReducer::beginPass(const std::vector<bool>& taking_part) {
  std::lock_guard<std::mutex> lock(mutex_);
  taking_part_ = taking_part;
  participants_ = static_cast<int>(std::count(taking_part.begin(), taking_part.end(), true));
  arrived_ = 0;
  aborted_ = false;
}

void BatchStatsReducer::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  released_.notify_all();
}

void BatchStatsReducer::reduce(int index, double* data, int64_t n) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw Error("batch statistics: another compute thread failed");
  std::vector<double>& mine = slots_[static_cast<size_t>(index)];
  mine.assign(data, data + n);
  if (++arrived_ < participants_) {
    const uint64_t call = generation_;
    released_.wait(lock, [&] { return generation_ != call || aborted_; });
    if (generation_ == call) throw Error("batch statistics: another compute thread failed");
  } else {
    // The last to arrive sums in replica order, so every thread count and
    // arrival order gives the same bits.
    result_.assign(static_cast<size_t>(n), 0.0);
    for (size_t r = 0; r < slots_.size(); ++r) {
      if (!taking_part_[r]) continue;
      if (static_cast<int64_t>(slots_[r].size()) != n)
        throw Error("batch statistics: compute threads disagree on the vector length");
      for (int64_t i = 0; i < n; ++i) result_[static_cast<size_t>(i)] += slots_[r][static_cast<size_t>(i)];
    }
    if (rank_sum_) {
      // The other threads wait meanwhile; the lock keeps the result stable.
      rank_sum_(result_.data(), n);
    }
    arrived_ = 0;
    ++generation_;
    released_.notify_all();
  }
  std::copy(result_.begin(), result_.end(), data);
}

}  // namespace dtrain
