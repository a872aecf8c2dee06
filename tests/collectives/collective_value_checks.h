// Exact-value checks of every collective, run by each rank of a group in the
// collectives suites of every group kind (Gloo, shared memory): each fills its
// input from contribution() and compares what comes back element by element.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "collectives_test_util.h"
#include "core/comm/process_group.h"

namespace dtrain::testing {

inline void checkAllReduceFloat(ProcessGroup& group, int64_t n, int round) {
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = contribution(group.rank(), i, round);
  group.allReduceSum(data.data(), n);
  CHECK_MESSAGE(
      firstMismatch(data.data(), n, [&](int64_t i) { return sumOverRanks(group.size(), i, round); }) == "",
      "all-reduce float n=" << n << " round " << round << " rank " << group.rank());
}

inline void checkAllReduceDouble(ProcessGroup& group, int64_t n, int round) {
  // Beyond float precision: a path that went through float would lose the low digits.
  auto value = [&](int rank, int64_t i) { return 1e12 + 1e6 * rank + double(i % 4099) + 7.0 * round; };
  std::vector<double> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = value(group.rank(), i);
  group.allReduceSum(data.data(), n);
  CHECK_MESSAGE(firstMismatch(data.data(), n,
                              [&](int64_t i) {
                                double sum = 0;
                                for (int r = 0; r < group.size(); ++r) sum += value(r, i);
                                return sum;
                              }) == "",
                "all-reduce double n=" << n << " round " << round << " rank " << group.rank());
}

inline void checkBroadcast(ProcessGroup& group, int64_t n, int root) {
  std::vector<float> data(n, -1.0f);
  if (group.rank() == root)
    for (int64_t i = 0; i < n; ++i) data[i] = contribution(root, i, 1);
  group.broadcast(data.data(), n, root);
  CHECK_MESSAGE(firstMismatch(data.data(), n, [&](int64_t i) { return contribution(root, i, 1); }) == "",
                "broadcast n=" << n << " root " << root << " rank " << group.rank());

  std::vector<uint8_t> bytes(n, 0);
  if (group.rank() == root)
    for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3 + root);
  group.broadcastBytes(bytes.data(), n, root);
  CHECK_MESSAGE(
      firstMismatch(bytes.data(), n, [&](int64_t i) { return static_cast<uint8_t>(i * 7 + 3 + root); }) == "",
      "broadcast bytes n=" << n << " root " << root << " rank " << group.rank());
}

inline void checkAllGather(ProcessGroup& group, int64_t n) {
  const int size = group.size();
  std::vector<float> in(n), out(n * size, -1.0f);
  for (int64_t i = 0; i < n; ++i) in[i] = contribution(group.rank(), i, 2);
  group.allGather(in.data(), n, out.data());
  auto expected = [&](int64_t j) { return contribution(static_cast<int>(j / n), j % n, 2); };
  CHECK_MESSAGE(firstMismatch(out.data(), n * size, expected) == "",
                "all-gather n=" << n << " rank " << group.rank());

  // In place: the rank's own input already sits at its place in the output.
  std::vector<float> inPlace(n * size, -1.0f);
  for (int64_t i = 0; i < n; ++i) inPlace[group.rank() * n + i] = contribution(group.rank(), i, 2);
  group.allGather(inPlace.data() + group.rank() * n, n, inPlace.data());
  CHECK_MESSAGE(firstMismatch(inPlace.data(), n * size, expected) == "",
                "in-place all-gather n=" << n << " rank " << group.rank());
}

inline void checkReduceScatter(ProcessGroup& group, const std::vector<int64_t>& counts) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = contribution(group.rank(), i, 3);
  group.reduceScatterSum(data.data(), counts);
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + group.rank(), int64_t(0));
  CHECK_MESSAGE(firstMismatch(data.data() + offset, counts[group.rank()],
                              [&](int64_t i) { return sumOverRanks(group.size(), offset + i, 3); }) == "",
                "reduce-scatter n=" << n << " rank " << group.rank());
}

// The reverse of checkReduceScatter, in place: every rank ends with every
// rank's segment; what a rank held outside its own segment is overwritten.
inline void checkAllGatherInPlace(ProcessGroup& group, const std::vector<int64_t>& counts) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + group.rank(), int64_t(0));
  std::vector<float> data(n, -1.0f);
  for (int64_t i = offset; i < offset + counts[group.rank()]; ++i) data[i] = contribution(group.rank(), i, 4);
  group.allGatherInPlace(data.data(), counts);
  auto owner = [&](int64_t i) {
    int r = 0;
    for (int64_t end = counts[0]; i >= end; end += counts[++r]) {
    }
    return r;
  };
  CHECK_MESSAGE(firstMismatch(data.data(), n, [&](int64_t i) { return contribution(owner(i), i, 4); }) == "",
                "all-gather in place n=" << n << " rank " << group.rank());
}

inline void checkNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    CHECK_MESSAGE(errors[r] == "", "rank " << r << " of " << errors.size());
}

}  // namespace dtrain::testing
