// Which device a job computes on, on a machine whatever its GPUs: "cpu" is
// always the CPU, "auto" a GPU only when one is usable, and "cuda" either a
// GPU or a one-line refusal that says why and what to do. Without the CUDA
// backend, device memory is refused the same way.
#include "core/train/device_choice.h"

#include <doctest/doctest.h>

#include <string>

#include "core/backend/device_memory.h"
#include "core/backend/device_query.h"
#include "core/errors.h"

using namespace dtrain;

TEST_CASE("device = cpu is the CPU; auto is a GPU exactly when the build and the machine have one") {
  CHECK(resolveDevice("cpu").isCpu());
  CHECK(resolveDevice("cpu", 3).isCpu());
  const int gpus = cudaBackendBuilt() ? visibleCudaDevices() : 0;
  const Device a = resolveDevice("auto", 5);
  if (gpus == 0) {
    CHECK(a.isCpu());
  } else {
    CHECK(a.kind == Device::Kind::Cuda);
    CHECK(a.index == 5 % gpus);
  }
  CHECK(describeDevice(Device::cpu()) == "cpu");
}

TEST_CASE("device = cuda without a usable GPU fails in one line naming the reason and the way out") {
  if (cudaBackendBuilt() && visibleCudaDevices() > 0) {
    // Each local worker takes the GPU of its index, wrapping around.
    const int gpus = visibleCudaDevices();
    CHECK(resolveDevice("cuda", gpus + 1).index == 1 % gpus);
    return;
  }
  try {
    resolveDevice("cuda");
    FAIL("device = cuda was accepted without a GPU");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find("[job] device = \"cuda\"") != std::string::npos);
    CHECK(msg.find("use device = \"cpu\"") != std::string::npos);
    const char* reason = cudaBackendBuilt() ? "no CUDA device is visible" : "built without the CUDA backend";
    CHECK(msg.find(reason) != std::string::npos);
  }
}

TEST_CASE("host tensors: to(), add() and pinned buffers behave on any build") {
  Tensor a = Tensor::zeros(Shape{5});
  a.fill(1.5f);
  Tensor b = a.to(Device::cpu());
  CHECK(b.data() == a.data());  // already there: the same tensor
  Tensor p = Tensor::pinned(Shape{2, 3});
  CHECK(p.device().isCpu());
  CHECK(reinterpret_cast<uintptr_t>(p.data()) % 64 == 0);
  p.fill(2.0f);
  Tensor c = Tensor::zeros(Shape{6});
  c.copyFrom(p);
  c.add(p);
  CHECK(c.data()[5] == 4.0f);
  if (!cudaBackendBuilt() || visibleCudaDevices() == 0) {
    CHECK_THROWS_AS(Tensor::empty(Shape{4}, Device::cuda(0)), DeviceError);
  }
}
