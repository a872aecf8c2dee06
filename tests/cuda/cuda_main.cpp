// The CUDA tests' main: without a visible GPU it reports the suite skipped
// (exit 77, which CTest shows as "Skipped"), otherwise it runs doctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/backend/cpu/openblas_kernels.h"
#include "core/backend/device_query.h"

int main(int argc, char** argv) {
  dtrain::pinOpenblasKernels(argv);  // the CPU side of each comparison, as dtrain computes it
  if (dtrain::visibleCudaDevices() == 0) {
    std::printf("no CUDA device visible: CUDA tests skipped\n");
    return 77;
  }
  std::printf("CUDA device 0: %s\n", dtrain::cudaDeviceName(0).c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
