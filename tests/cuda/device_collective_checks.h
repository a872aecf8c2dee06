// Exact-value checks of every collective on device memory, for the GPU
// process groups (NCCL, host-staged): the contributions of
// tests/collectives/collective_value_checks.h, uploaded to the rank's current
// device on its compute stream and read back there. The upload is not waited
// for, so each check also asks that a call waits for the work queued on the
// compute stream before it, and that work queued after it sees the result.
#pragma once
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/comm/process_group.h"
#include "tests/collectives/collectives_test_util.h"

namespace dtrain::testing {

// Device memory on the current device holding `values`, copied on `stream`.
template <typename T>
class DeviceArray {
 public:
  DeviceArray(std::vector<T> values, cudaStream_t stream) : host_(std::move(values)), stream_(stream) {
    checkCuda(cudaMalloc(&data_, std::max<size_t>(bytes(), 1)), "allocate a test buffer");
    // host_ stays alive with the object, however long the queued copy takes.
    if (!host_.empty())
      checkCuda(cudaMemcpyAsync(data_, host_.data(), bytes(), cudaMemcpyHostToDevice, stream_), "upload");
  }
  ~DeviceArray() {
    cudaStreamSynchronize(stream_);
    cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() { return data_; }

  // The contents, copied on the stream after all the work queued there.
  std::vector<T> read() {
    std::vector<T> out(host_.size());
    if (!out.empty())
      checkCuda(cudaMemcpyAsync(out.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream_), "download");
    checkCuda(cudaStreamSynchronize(stream_), "wait for the download");
    return out;
  }

 private:
  size_t bytes() const { return host_.size() * sizeof(T); }

  std::vector<T> host_;
  cudaStream_t stream_;
  T* data_ = nullptr;
};

inline void checkDeviceAllReduceFloat(ProcessGroup& group, int64_t n, int round, cudaStream_t stream) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = contribution(group.rank(), i, round);
  DeviceArray<float> data(values, stream);
  group.allReduceSum(data.get(), n);
  const std::vector<float> got = data.read();
  CHECK_MESSAGE(
      firstMismatch(got.data(), n, [&](int64_t i) { return sumOverRanks(group.size(), i, round); }) == "",
      "device all-reduce float n=" << n << " round " << round << " rank " << group.rank());
}

inline void checkDeviceAllReduceDouble(ProcessGroup& group, int64_t n, int round, cudaStream_t stream) {
  // Beyond float precision: a path that went through float would lose the low digits.
  auto value = [&](int rank, int64_t i) { return 1e12 + 1e6 * rank + double(i % 4099) + 7.0 * round; };
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = value(group.rank(), i);
  DeviceArray<double> data(values, stream);
  group.allReduceSum(data.get(), n);
  const std::vector<double> got = data.read();
  CHECK_MESSAGE(firstMismatch(got.data(), n,
                              [&](int64_t i) {
                                double sum = 0;
                                for (int r = 0; r < group.size(); ++r) sum += value(r, i);
                                return sum;
                              }) == "",
                "device all-reduce double n=" << n << " round " << round << " rank " << group.rank());
}

inline void checkDeviceBroadcast(ProcessGroup& group, int64_t n, int root, cudaStream_t stream) {
  std::vector<float> values(n, -1.0f);
  if (group.rank() == root)
    for (int64_t i = 0; i < n; ++i) values[i] = contribution(root, i, 1);
  DeviceArray<float> data(values, stream);
  group.broadcast(data.get(), n, root);
  const std::vector<float> got = data.read();
  CHECK_MESSAGE(firstMismatch(got.data(), n, [&](int64_t i) { return contribution(root, i, 1); }) == "",
                "device broadcast n=" << n << " root " << root << " rank " << group.rank());

  std::vector<uint8_t> byteValues(n, 0);
  if (group.rank() == root)
    for (int64_t i = 0; i < n; ++i) byteValues[i] = static_cast<uint8_t>(i * 7 + 3 + root);
  DeviceArray<uint8_t> bytes(byteValues, stream);
  group.broadcastBytes(bytes.get(), n, root);
  const std::vector<uint8_t> gotBytes = bytes.read();
  CHECK_MESSAGE(firstMismatch(gotBytes.data(), n,
                              [&](int64_t i) { return static_cast<uint8_t>(i * 7 + 3 + root); }) == "",
                "device broadcast bytes n=" << n << " root " << root << " rank " << group.rank());
}

inline void checkDeviceAllGather(ProcessGroup& group, int64_t n, cudaStream_t stream) {
  const int size = group.size();
  auto expected = [&](int64_t j) { return contribution(static_cast<int>(j / n), j % n, 2); };
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = contribution(group.rank(), i, 2);
  DeviceArray<float> in(values, stream);
  DeviceArray<float> out(std::vector<float>(n * size, -1.0f), stream);
  group.allGather(in.get(), n, out.get());
  const std::vector<float> got = out.read();
  CHECK_MESSAGE(firstMismatch(got.data(), n * size, expected) == "",
                "device all-gather n=" << n << " rank " << group.rank());

  // In place: the rank's own input already sits at its place in the output.
  std::vector<float> whole(n * size, -1.0f);
  std::copy(values.begin(), values.end(), whole.begin() + group.rank() * n);
  DeviceArray<float> inPlace(whole, stream);
  group.allGather(inPlace.get() + group.rank() * n, n, inPlace.get());
  const std::vector<float> gotInPlace = inPlace.read();
  CHECK_MESSAGE(firstMismatch(gotInPlace.data(), n * size, expected) == "",
                "device in-place all-gather n=" << n << " rank " << group.rank());
}

inline void checkDeviceReduceScatter(ProcessGroup& group, const std::vector<int64_t>& counts,
                                     cudaStream_t stream) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = contribution(group.rank(), i, 3);
  DeviceArray<float> data(values, stream);
  group.reduceScatterSum(data.get(), counts);
  const std::vector<float> got = data.read();
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + group.rank(), int64_t(0));
  CHECK_MESSAGE(firstMismatch(got.data() + offset, counts[group.rank()],
                              [&](int64_t i) { return sumOverRanks(group.size(), offset + i, 3); }) == "",
                "device reduce-scatter n=" << n << " rank " << group.rank());
}

}  // namespace dtrain::testing
