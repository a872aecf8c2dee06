// NcclProcessGroup on real GPUs: a one-rank group keeps every value through
// every collective (device memory in place, host memory staged), a call waits
// for the compute stream's queued work, two ranks on two GPUs (threads as
// ranks) sum exactly, and a peer that never comes, or stops taking part,
// fails the others within the timeout instead of hanging them; messages
// between two GPUs arrive in order, and a bad peer is refused.
#include "core/comm/cuda/nccl_process_group.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/backend/device_query.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"
#include "device_collective_checks.h"
#include "tests/collectives/collective_value_checks.h"

using namespace dtrain;
using namespace dtrain::testing;
using namespace std::chrono_literals;

namespace {

void useDevice(int device) { checkCuda(cudaSetDevice(device), "select the test's device"); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every collective, device memory and host memory, exact values.
void checkEveryCollective(ProcessGroup& group, int64_t n, cudaStream_t compute) {
  const int size = group.size();
  const int lastRank = size - 1;
  // Equal counts (NCCL's reduce-scatter) and, from 2 ranks, uneven ones (an all-reduce).
  const std::vector<int64_t> even(size, n / size);
  std::vector<int64_t> uneven(size, 0);
  uneven[lastRank] = n;

  checkDeviceAllReduceFloat(group, n, 0, compute);
  checkDeviceAllReduceFloat(group, n, 1, compute);
  checkDeviceAllReduceDouble(group, n, 0, compute);
  checkDeviceBroadcast(group, n, lastRank, compute);
  checkDeviceAllGather(group, n, compute);
  checkDeviceReduceScatter(group, even, compute);
  if (size > 1) checkDeviceReduceScatter(group, uneven, compute);

  checkAllReduceFloat(group, n, 0);
  checkAllReduceDouble(group, n, 0);
  checkBroadcast(group, n, lastRank);
  checkAllGather(group, n);
  checkReduceScatter(group, even);
  if (size > 1) checkReduceScatter(group, uneven);
  group.barrier();
}

}  // namespace

TEST_CASE("nccl: a one-rank group keeps every value, in device and in host memory") {
  useDevice(0);
  CudaStream compute;
  InMemoryStore store;
  NcclProcessGroup group(store, "nccl-one", 0, 1, 0, compute.get(), 30s);
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);
  CHECK(group.describe() == "nccl (device 0)");
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), (int64_t(1) << 20) + 3}) {
    CAPTURE(n);
    checkEveryCollective(group, n, compute.get());
  }
}

TEST_CASE("nccl: a call sees the work queued on the compute stream before it") {
  useDevice(0);
  CudaStream compute;
  InMemoryStore store;
  NcclProcessGroup group(store, "nccl-order", 0, 1, 0, compute.get(), 30s);
  const int64_t n = int64_t(1) << 24;
  DeviceArray<float> in(std::vector<float>(n, 0.0f), compute.get());
  DeviceArray<float> out(std::vector<float>(n, -1.0f), compute.get());
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    // Queued, not waited for: the gather must come after it all the same.
    cuda::fill(in.get(), n, static_cast<float>(round), compute.get());
    group.allGather(in.get(), n, out.get());
    const std::vector<float> got = out.read();
    CHECK(firstMismatch(got.data(), n, [&](int64_t) { return static_cast<float>(round); }) == "");
  }
}

TEST_CASE("nccl: two ranks on two GPUs sum exactly, in device and in host memory") {
  if (visibleCudaDevices() < 2) {
    MESSAGE("needs 2 GPUs: skipped");
    return;
  }
  const int size = 2;
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    useDevice(rank);
    CudaStream compute;
    NcclProcessGroup group(store, "nccl-two", rank, size, rank, compute.get(), 30s);
    CHECK(group.describe() == "nccl (device " + std::to_string(rank) + ")");
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), (int64_t(1) << 20) + 3}) {
      CAPTURE(n);
      checkEveryCollective(group, n, compute.get());
    }
  });
  checkNoErrors(errors);
}

TEST_CASE("nccl: a peer that stops taking part fails the call within the timeout, and every later one") {
  if (visibleCudaDevices() < 2) {
    MESSAGE("needs 2 GPUs: skipped");
    return;
  }
  const int size = 2;
  InMemoryStore store;
  std::atomic<bool> rankZeroDone{false};
  std::string first, later;
  double took = 0;
  auto errors = runRanks(size, [&](int rank) {
    useDevice(rank);
    CudaStream compute;
    NcclProcessGroup group(store, "nccl-stop", rank, size, rank, compute.get(), 2s);
    checkDeviceAllReduceFloat(group, 1001, 0, compute.get());
    if (rank == 1) {
      // Skips the next all-reduce, and stays until rank 0 has given up on it.
      while (!rankZeroDone) std::this_thread::sleep_for(10ms);
      return;
    }
    std::vector<float> data(4096, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      group.allReduceSum(data.data(), 4096);
    } catch (const CommError& e) {
      first = e.what();
    }
    took = secondsSince(start);
    try {
      group.barrier();
    } catch (const CommError& e) {
      later = e.what();
    }
    rankZeroDone = true;
  });
  checkNoErrors(errors);
  CAPTURE(first);
  CAPTURE(later);
  CHECK(first ==
        "NCCL all-reduce of 4096 floats on rank 0 did not complete within 2 s; a peer stopped taking part");
  CHECK(took >= 1.9);
  CHECK(took < 6.0);
  CHECK(has(later, "NCCL barrier on rank 0: the group failed earlier (NCCL all-reduce of 4096 floats"));
  CHECK(has(later, "it cannot be used again"));
}

TEST_CASE("nccl: a peer that never comes fails the constructor within the timeout") {
  useDevice(0);
  CudaStream compute;
  InMemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    NcclProcessGroup group(store, "nccl-alone", 0, 2, 0, compute.get(), 2s);
  } catch (const CommError& e) {
    error = e.what();
  }
  const double took = secondsSince(start);
  CHECK(error ==
        "nccl group (rank 0 of 2, device 0): the ranks did not all join the NCCL group within 2 s; "
        "a peer never came (start every rank, or raise the timeout)");
  CHECK(took >= 1.9);
  CHECK(took < 5.0);

  // Without rank 0, the id never comes.
  InMemoryStore empty;
  CHECK_THROWS_WITH_AS(
      NcclProcessGroup(empty, "nccl-no-root", 1, 2, 0, compute.get(), 300ms),
      doctest::Contains("nccl group (rank 1 of 2, device 0): waiting for rank 0's NCCL id: "), CommError);
}

TEST_CASE("nccl: bad arguments are refused with a clear message") {
  useDevice(0);
  CudaStream compute;
  InMemoryStore store;
  CHECK_THROWS_WITH_AS(NcclProcessGroup(store, "bad", 2, 2, 0, compute.get(), 1s),
                       "nccl group (rank 2 of 2, device 0): the rank must be between 0 and 1", CommError);
  CHECK_THROWS_WITH_AS(NcclProcessGroup(store, "bad", 0, 1, 0, compute.get(), 0ms),
                       "nccl group (rank 0 of 1, device 0): the timeout must be positive (it is 0 ms)",
                       CommError);
  CHECK_THROWS_WITH_AS(
      NcclProcessGroup(store, "bad", 0, 1, 4096, compute.get(), 1s),
      doctest::Contains("nccl group (rank 0 of 1, device 4096): there is no CUDA device 4096"), DeviceError);

  NcclProcessGroup group(store, "nccl-arguments", 0, 1, 0, compute.get(), 30s);
  std::vector<float> data(4, 2.0f);
  CHECK_THROWS_WITH_AS(group.broadcast(data.data(), 4, 1),
                       "broadcast: root rank 1 is outside the group of 1 ranks", CommError);
  CHECK_THROWS_WITH_AS(group.reduceScatterSum(data.data(), {2, 2}),
                       "reduce-scatter: 2 counts given for a group of 1 rank (one count per rank)",
                       CommError);
  CHECK_THROWS_WITH_AS(group.allReduceSum(data.data(), -1), "all-reduce: element count -1 is negative",
                       CommError);
  // Refused arguments leave the group usable.
  group.allReduceSum(data.data(), 4);
  CHECK(data == std::vector<float>(4, 2.0f));
  // A message to or from itself, or a rank the group has not.
  CHECK_THROWS_WITH_AS(group.sendAsync(data.data(), 16, 0, 0),
                       "NCCL send of 16 bytes to rank 0 on rank 0: a group of 1 rank has no peer", CommError);
  CHECK_THROWS_WITH_AS(group.recv(data.data(), 16, 3, 0), doctest::Contains("a group of 1 rank has no peer"),
                       CommError);
}

TEST_CASE("nccl: messages between two GPUs arrive in order, from and into device and host memory") {
  if (visibleCudaDevices() < 2) {
    MESSAGE("needs 2 GPUs: skipped");
    return;
  }
  InMemoryStore store;
  constexpr int64_t kFloats = (int64_t(1) << 18) + 5;
  auto errors = runRanks(2, [&](int rank) {
    useDevice(rank);
    CudaStream compute;
    NcclProcessGroup group(store, "nccl-p2p", rank, 2, rank, compute.get(), 30s);
    float* device = nullptr;
    checkCuda(cudaMalloc(&device, kFloats * sizeof(float)), "allocate the test's buffer");
    std::vector<float> host(kFloats);
    if (rank == 0) {
      // Three messages: host memory, device memory, host memory changed after its send returned.
      for (int64_t i = 0; i < kFloats; ++i) host[static_cast<size_t>(i)] = static_cast<float>(i);
      checkCuda(cudaMemcpy(device, host.data(), kFloats * sizeof(float), cudaMemcpyHostToDevice), "upload");
      group.sendAsync(host.data(), kFloats * sizeof(float), 1, 0);
      group.sendAsync(device, kFloats * sizeof(float), 1, 0);
      std::vector<float> small{7.0f, 8.0f};
      group.sendAsync(small.data(), 2 * sizeof(float), 1, 0);
      small = {0.0f, 0.0f};  // the send keeps a copy of its own
      group.waitSends();
    } else {
      group.recv(device, kFloats * sizeof(float), 0, 0);  // the first, into device memory
      group.recv(host.data(), kFloats * sizeof(float), 0, 0);
      std::vector<float> small(2);
      group.recv(small.data(), 2 * sizeof(float), 0, 0);
      std::vector<float> first(kFloats);
      checkCuda(cudaMemcpy(first.data(), device, kFloats * sizeof(float), cudaMemcpyDeviceToHost),
                "download");
      int64_t wrong = 0;
      for (int64_t i = 0; i < kFloats; ++i)
        wrong += first[static_cast<size_t>(i)] != static_cast<float>(i) ||
                 host[static_cast<size_t>(i)] != static_cast<float>(i);
      CHECK(wrong == 0);
      CHECK(small == std::vector<float>{7.0f, 8.0f});
    }
    cudaFree(device);
  });
  checkNoErrors(errors);
}
