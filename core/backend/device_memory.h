// Memory on a compute device for Tensor: allocation, copies between host and
// device, fills and sums. Asked the same way with or without the CUDA backend
// compiled in; without it, anything but the CPU throws DeviceError naming the
// device and what to do.
//
// Ordering: device work runs on the device's compute stream (see
// core/backend/cuda/cuda_context.h), in the order it is asked for. A copy into
// host memory returns once the data are there; one from host memory returns
// once the host buffer may be reused, except from pinned memory (pinnedHost),
// whose copy is queued and must not be overwritten before the stream reaches it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/tensor/tensor.h"

namespace dtrain {

// `bytes` of ordinary host memory, 64-byte aligned, freed with the last owner.
std::shared_ptr<void> allocateHost(size_t bytes);
// Zeroed host memory; from 2 MiB up a mapping of its own, 2 MiB-aligned,
// whose pages cost nothing until first written, the kernel asked (madvise
// MADV_HUGEPAGE) to back it with transparent huge pages.
std::shared_ptr<void> allocateHostHugePages(size_t bytes);
// `bytes` of memory on `device` (not the CPU), freed with the last owner.
std::shared_ptr<void> allocateDeviceMemory(Device device, size_t bytes);
// Page-locked host memory when the CUDA backend is built and a GPU is
// visible (so copies to the GPU run asynchronously), else ordinary aligned
// host memory. 64-byte aligned either way.
std::shared_ptr<void> allocatePinnedHost(size_t bytes);
// Copies `bytes` between any two of host and device memory.
void copyDeviceMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// p[i] = value for n floats on `device`.
void fillDeviceMemory(float* p, int64_t n, float value, Device device);
// p[i] = bits for n 16-bit values on `device`.
void fillDeviceMemory16(uint16_t* p, int64_t n, uint16_t bits, Device device);
// Between float and 16-bit dtypes on `device` (either way; F32 -> 16 bits
// rounds to nearest even, as ops::roundTo16Bits; the reverse is exact), n values.
void convertDeviceMemory(const void* src, DType from, void* dst, DType to, int64_t n, Device device);
// dst[i] += src[i] for n values of 16-bit `dtype` on `device`, summed in
// float and rounded back.
void addDeviceMemory16(void* dst, const void* src, DType dtype, int64_t n, Device device);
// dst[i] += src[i] for n floats on `device`.
void addDeviceMemory(float* dst, const float* src, int64_t n, Device device);
// The most memory dtrain held on `device` (not the CPU) at once since the
// previous call, or for the first since the device's first use: blocks
// handed out, and those kept for a recorded step's replays (cached free ones
// not). Each call starts the next span, so the trainer reads a step's peak
// apart from the first steps' algorithm searches.
int64_t peakDeviceMemory(Device device);

}  // namespace dtrain
