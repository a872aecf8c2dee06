// How a GPU's layers choose their library algorithms, from [job]
// deterministic and gpu_workspace_mb, and where the choices are kept. The
// engine fills it; the CUDA module's layers (core/nn/cuda/) read it.
#pragma once
#include <cstddef>

namespace dtrain {

class AlgorithmCache;

struct GpuLayerOptions {
  // Only deterministic convolution algorithms are candidates.
  bool deterministic = true;
  // The most workspace one library call may use (and an algorithm search may
  // borrow); never more than the device's allocator can give.
  size_t workspace_limit_bytes = size_t{1024} << 20;
  // Timed choices, shared by every layer of the process and saved by the
  // engine; null keeps each layer's choices to itself, for its lifetime.
  AlgorithmCache* algorithms = nullptr;
};

}  // namespace dtrain
