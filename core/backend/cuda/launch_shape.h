// Launch shapes shared by the backend's kernels.
#pragma once
#include <cstdint>

namespace dtrain::cuda {

// Threads per block of the elementwise kernels.
constexpr int kElementwiseThreads = 256;

// Blocks for a grid-stride loop over n items: one item per thread up to
// `max_blocks` blocks (about a million threads, enough to keep any current GPU
// busy), after which each thread takes several. At least one block.
inline unsigned gridStrideBlocks(int64_t n, int threads = kElementwiseThreads, int64_t max_blocks = 4096) {
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < max_blocks ? wanted : max_blocks));
}

}  // namespace dtrain::cuda
