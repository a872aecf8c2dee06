// CUDA dropout against the CPU on fresh random inputs with odd sizes (and one
// past the grid-stride cap): forward and backward outputs bit-identical, i.e.
// the same mask and the same scale, for several rates and keys.
#include "core/backend/cuda/dropout_kernels.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/dropout_mask.h"
#include "core/backend/ops.h"
#include "core/util/rng.h"
#include "tests/cuda/device_array.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda: the shared mask's splitmix64 is the RNG's") {
  // dropout_mask.h repeats core/util/rng.h's splitmix64 for device code; the
  // CPU mask (and so every saved run) depends on the two staying equal.
  Rng rng(5);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = rng.next();
    CHECK(dropout_mask::splitmix64(x) == splitmix64(x));
  }
}

TEST_CASE("cuda: dropout forward and backward are bit-identical to the CPU") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(21);
  struct Size {
    int64_t rows, cols;
  };
  const ops::DropoutKey keys[] = {{12345, 3, 1000}, {7, 0, 0}, {~uint64_t(0), 11, (int64_t(1) << 33) + 5}};
  for (Size s : {Size{37, 1001}, Size{3, 5}, Size{513, 2049}}) {
    for (float rate : {0.0f, 0.1f, 0.5f, 0.9f})
      for (const ops::DropoutKey& key : keys) {
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        CAPTURE(rate);
        CAPTURE(key.seed);
        const size_t n = static_cast<size_t>(s.rows * s.cols);
        std::vector<float> x(n), dy(n);
        for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
        for (float& v : dy) v = rng.uniform(-1.0f, 1.0f);
        std::vector<float> y(n), dx(n);
        ops::dropoutForward(x.data(), y.data(), s.rows, s.cols, rate, key);
        ops::dropoutBackward(dy.data(), dx.data(), s.rows, s.cols, rate, key);

        DeviceArray<float> d_x(memory, stream, x), d_y(memory, stream, n), d_dy(memory, stream, dy),
            d_dx(memory, stream, n);
        cuda::dropoutForward(d_x.get(), d_y.get(), s.rows, s.cols, rate, key, stream.get());
        cuda::dropoutBackward(d_dy.get(), d_dx.get(), s.rows, s.cols, rate, key, stream.get());
        CHECK(sameBits(d_y.download(), y));
        CHECK(sameBits(d_dx.download(), dx));

        // The comparison means something: the mask drops some elements and keeps others (rate > 0).
        if (rate > 0.0f && n > 1000) {
          int64_t dropped = 0;
          for (float v : y) dropped += v == 0.0f;
          CHECK(dropped > 0);
          CHECK(dropped < static_cast<int64_t>(n));
        }
      }
  }
}
