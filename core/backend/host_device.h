// DTRAIN_HOST_DEVICE marks a small inline function that both the CPU code and
// the CUDA kernels call, so the two compute the same thing from one
// definition: __host__ __device__ when nvcc compiles the file, nothing for the
// host compiler.
#pragma once

#if defined(__CUDACC__)
#define DTRAIN_HOST_DEVICE __host__ __device__
#else
#define DTRAIN_HOST_DEVICE
#endif
