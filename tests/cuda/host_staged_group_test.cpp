// HostStagedGroup over Gloo on a real GPU: two ranks (threads) sharing device
// 0, which NCCL would refuse, sum device buffers exactly through pinned host
// memory; host buffers pass straight through to Gloo, and Gloo's refusals
// reach the caller unchanged.
#include "core/comm/cuda/host_staged_group.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/comm/gloo_process_group.h"
#include "core/comm/in_memory_store.h"
#include "core/errors.h"
#include "device_collective_checks.h"
#include "tests/collectives/collective_value_checks.h"

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("host-staged gloo: two ranks on one GPU reduce device buffers exactly; host buffers pass through") {
  const int size = 2;
  InMemoryStore store;
  auto errors = runRanks(size, [&](int rank) {
    checkCuda(cudaSetDevice(0), "select the test's device");
    CudaStream compute;
    auto gloo = std::make_shared<GlooProcessGroup>(store, rank, size, testOptions());
    HostStagedGroup group(gloo, 0, compute.get());
    CHECK(group.rank() == rank);
    CHECK(group.size() == size);
    CHECK(group.describe() == "gloo (auto), staged through host memory");

    // Device memory: a gradient-sized buffer, twice (the pinned buffer is reused), then every collective.
    const int64_t n = 1000003;
    checkDeviceAllReduceFloat(group, n, 0, compute.get());
    checkDeviceAllReduceFloat(group, n, 1, compute.get());
    for (int64_t small : {int64_t(0), int64_t(1), int64_t(1001)}) {
      CAPTURE(small);
      checkDeviceAllReduceFloat(group, small, 2, compute.get());
      checkDeviceAllReduceDouble(group, small, 0, compute.get());
      checkDeviceBroadcast(group, small, 1, compute.get());
      checkDeviceAllGather(group, small, compute.get());
      checkDeviceReduceScatter(group, {small / 2, small / 2}, compute.get());
      checkDeviceReduceScatter(group, {small, 0}, compute.get());
    }

    // Host memory goes to Gloo as it is.
    checkAllReduceFloat(group, n, 0);
    checkAllReduceDouble(group, 1001, 0);
    checkBroadcast(group, 1001, 0);
    checkAllGather(group, 1001);
    checkReduceScatter(group, {500, 501});
    group.barrier();

    // Gloo's refusals reach the caller word for word, for device memory too.
    DeviceArray<float> data(std::vector<float>(4, 1.0f), compute.get());
    CHECK_THROWS_WITH_AS(group.broadcast(data.get(), 4, 2),
                         "broadcast: root rank 2 is outside the group of 2 ranks", CommError);
    CHECK_THROWS_WITH_AS(group.reduceScatterSum(data.get(), {4}),
                         "reduce-scatter: 1 counts given for a group of 2 ranks (one count per rank)",
                         CommError);
    group.allReduceSum(data.get(), 4);
    CHECK(data.read() == std::vector<float>(4, 2.0f));
  });
  checkNoErrors(errors);
}

TEST_CASE("host-staged gloo: a device that does not exist is refused in words") {
  InMemoryStore store;
  auto gloo = std::make_shared<GlooProcessGroup>(store, 0, 1, testOptions());
  CHECK_THROWS_WITH_AS(
      HostStagedGroup(gloo, 4096, nullptr),
      doctest::Contains("host-staged group (gloo (auto), rank 0): there is no CUDA device 4096"),
      DeviceError);
}
