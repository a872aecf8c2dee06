// Where a buffer handed to a collective lives, as CUDA sees it: the GPU
// process groups use device memory in place and stage host memory.
#pragma once

namespace dtrain {

struct PointerKind {
  // Device or managed memory: kernels and NCCL use it where it is.
  bool on_device = false;
  // The device that owns it; -1 for host memory and for managed memory
  // (which every device reaches).
  int device = -1;
};

// Asks CUDA about `pointer`. Host memory CUDA never saw (plain malloc) is
// host memory, and the error state older runtimes leave for it is cleared.
// Throws DeviceError only when CUDA itself fails.
PointerKind pointerKind(const void* pointer);

inline bool isDevicePointer(const void* pointer) { return pointerKind(pointer).on_device; }

}  // namespace dtrain
