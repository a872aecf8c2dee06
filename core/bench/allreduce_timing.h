// Timing an all-reduce of float32 over a process group, the way `dtrain bench
// allreduce` measures collective speed. Every call's result is checked
// against the exact sum, so a fast but wrong collective never reports a time.
//
// Each round: every rank fills the buffer with its own integers (different
// per rank, element and round, so a stale or misplaced chunk shows), the
// ranks meet at a barrier, the all-reduce is timed on this rank's clock, and
// every element is compared with the expected sum. Filling and checking are
// outside the timed span.
//
// Collective: every rank calls timeAllReduce with the same options. Blocks
// for the whole measurement; one thread at a time per group.
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm/process_group.h"

namespace dtrain {

struct AllReduceTimingOptions {
  int64_t elements = 0;  // float32 values per rank
  int warmup = 2;        // untimed rounds first (connections, algorithm set-up)
  int iters = 10;        // timed rounds
};

struct AllReduceTiming {
  std::vector<double> seconds;  // one per timed round, this rank's clock
  double median() const;        // of `seconds`; the mean of the middle two for an even count
  double min() const;
  double max() const;
};

// Limits that keep every expected sum an exact float32 integer (below 2^24).
constexpr int kAllReduceTimingMaxRanks = 64;
constexpr int kAllReduceTimingMaxRounds = 1000;

// What `rank` contributes at element `i` in round `round`, and the sum over
// `size` ranks: small integers, so float32 sums are exact in any order.
float allReduceTimingValue(int rank, int64_t i, int round);
float allReduceTimingSum(int size, int64_t i, int round);

// Runs the rounds; throws CommError naming the rank, round and first wrong
// element when a result is not the exact sum, ConfigError for options out of
// range, and whatever the group throws when a peer fails.
AllReduceTiming timeAllReduce(ProcessGroup& group, const AllReduceTimingOptions& options);

}  // namespace dtrain
