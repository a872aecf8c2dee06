// Device memory through the caching allocator, streams and events, and the
// first kernels, on a real GPU: values written on the device come back, a
// step's buffers are reused, and an impossible request fails in words.
#include "core/backend/cuda/cuda_memory.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/errors.h"

using namespace dtrain;

TEST_CASE("cuda: fill and axpy on a stream, results copied back exactly") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1) << 22}) {
    CAPTURE(n);
    auto* x = static_cast<float*>(memory.allocate(n * sizeof(float)));
    auto* y = static_cast<float*>(memory.allocate(n * sizeof(float)));
    cuda::fill(x, n, 1.5f, stream.get());
    cuda::fill(y, n, -2.0f, stream.get());
    cuda::axpy(4.0f, x, y, n, stream.get());  // 4 * 1.5 - 2 = 4
    std::vector<float> host(static_cast<size_t>(n));
    checkCuda(cudaMemcpyAsync(host.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, stream.get()),
              "copy");
    stream.synchronize();
    int64_t wrong = 0;
    for (float v : host) wrong += v != 4.0f;
    CHECK(wrong == 0);
    memory.release(x);
    memory.release(y);
  }
}

TEST_CASE("cuda: an event orders a second stream after the first") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream producer, consumer;
  CudaEvent ready;
  const int64_t n = int64_t(1) << 24;
  auto* x = static_cast<float*>(memory.allocate(n * sizeof(float)));
  cuda::fill(x, n, 3.0f, producer.get());
  ready.record(producer);
  ready.makeWait(consumer);
  cuda::axpy(1.0f, x, x, n, consumer.get());  // 6 everywhere, only if the fill came first
  std::vector<float> host(static_cast<size_t>(n));
  checkCuda(cudaMemcpyAsync(host.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, consumer.get()),
            "copy");
  consumer.synchronize();
  CHECK(host.front() == 6.0f);
  CHECK(host.back() == 6.0f);
  memory.release(x);
}

TEST_CASE("cuda: repeated steps reuse device blocks; an impossible size fails with a message") {
  CachingAllocator memory(cudaRawAllocator(0));
  for (int step = 0; step < 5; ++step) {
    void* a = memory.allocate(123456);
    void* b = memory.allocate(7 << 20);
    memory.release(a);
    memory.release(b);
  }
  CHECK(memory.stats().raw_allocations == 2);
  CHECK(memory.stats().reuses == 8);
  try {
    memory.allocate(size_t(1) << 50);  // a petabyte
    FAIL("expected an out-of-memory error");
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()).find("cuda:0: out of memory allocating") == 0);
  }
}
