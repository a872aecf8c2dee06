// The CUDA versions of the CPU's bias, relu and scaling passes (ops.h,
// cpu/bias_act.cpp, optim/grad_clip.h), with the same results: bias and relu
// bit for bit; the reductions in double, so within float rounding of the CPU.
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory; extents of 0 queue nothing
// (sumOfSquares still writes 0).
//
// The reductions (biasGrad*, sumOfSquares) are deterministic: each block sums
// a fixed part of the input in a fixed order, and when a call needs more than
// one block per output the per-block partial sums go to scratch memory from
// the stream-ordered allocator (cudaMallocAsync) and a second kernel adds them
// in block order. The result depends only on the inputs and sizes. They throw
// DeviceError when that scratch memory cannot be allocated.
//
// The bias, relu and bias-gradient passes also come with a DType: the same
// passes on tensors of that element type (a 16-bit precision's activations,
// core/backend/cuda/half_io.cuh), each value loaded as a float, the float
// arithmetic of the float functions, and every result stored rounded to the
// type (to nearest, ties to even; relu and its mask change no value, so they
// round nothing). With DType::F32 they are the float functions exactly.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// y[r,c] = act(y[r,c] + bias[c]) for a [rows, cols] matrix; bias may be null;
// act = relu when `relu`, else the identity.
void biasActRows(float* y, const float* bias, int64_t rows, int64_t cols, bool relu, cudaStream_t stream);
// y[s,ch,i] = act(y[s,ch,i] + bias[ch]) for n samples of `channels` planes of
// `plane` elements; bias may be null.
void biasActPlanes(float* y, const float* bias, int64_t n, int64_t channels, int64_t plane, bool relu,
                   cudaStream_t stream);
// dbias[c] += sum over rows of g[r,c], where g = dy, or dy masked by
// relu_out > 0 when relu_out is non-null (a fused relu's backward).
void biasGradRows(const float* dy, const float* relu_out, int64_t rows, int64_t cols, float* dbias,
                  cudaStream_t stream);
// dbias[ch] += sum over samples and the plane of g (same masking rule).
void biasGradPlanes(const float* dy, const float* relu_out, int64_t n, int64_t channels, int64_t plane,
                    float* dbias, cudaStream_t stream);
// y = max(x, 0); x may equal y.
void reluForward(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = y > 0 ? dy : 0, where y is relu's output; dx may equal dy.
void reluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
// x *= s.
void scale(float* x, int64_t n, float s, cudaStream_t stream);
// *out = sum of x[i]^2 accumulated in double (*out is a device double,
// written, not added to).
void sumOfSquares(const float* x, int64_t n, double* out, cudaStream_t stream);

// The element-typed passes (see the top): y and bias (a Product layer's
// 16-bit bias) both of `dtype`; the bias + relu stored rounded once, after
// the relu.
void biasActRows(void* y, const void* bias, DType dtype, int64_t rows, int64_t cols, bool relu,
                 cudaStream_t stream);
void biasActPlanes(void* y, const void* bias, DType dtype, int64_t n, int64_t channels, int64_t plane,
                   bool relu, cudaStream_t stream);
// dy and relu_out of `dtype`, dbias float: each value (exact in double)
// summed in double as the float ones are, and added to the fp32 gradient.
void biasGradRows(const void* dy, const void* relu_out, DType dtype, int64_t rows, int64_t cols, float* dbias,
                  cudaStream_t stream);
void biasGradPlanes(const void* dy, const void* relu_out, DType dtype, int64_t n, int64_t channels,
                    int64_t plane, float* dbias, cudaStream_t stream);
void reluForward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream);
void reluBackward(const void* y, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream);

}  // namespace dtrain::cuda
