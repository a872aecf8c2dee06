// The batch_norm layer's own GPU passes (core/nn/cuda/cuda_batch_norm.h),
// for what cuDNN's batch normalisation cannot do: statistics summed across
// ranks between the passes (a StatsReducer), the backward of an inference
// pass, the fused relu/relu6 and residual add around cuDNN's calls, and a
// single-process path with no host read-back that may outrun cuDNN's. They compute what the
// CPU passes compute (core/backend/batch_norm_ops.h, the layer's
// core/nn/layers/batch_norm.cpp), in the same order of operations per element.
//
// The batch is [n, channels, plane] (plane 1 for [C] samples). Per-channel
// sums are in double and deterministic: each channel's n * plane values are
// cut into slices fixed by the sizes, a block sums a slice (each thread a
// fixed subsequence, then a fixed tree), and a second kernel adds the slices
// in order. Their partial sums live in scratch memory from the stream-ordered
// allocator (DeviceError when it cannot be had).
//
// The batch's tensors (x, y, dy, dx and a fused add's residual) are of one
// element type, BatchNormDims::dtype: float, or in a 16-bit precision bf16 or
// fp16 (core/nn/precision.h, Normalisation). Every kernel loads them as
// floats and computes as the float kernels do, in the same order and with
// the same accumulators (for float the same numbers as ever), and stores a
// result rounded to the dtype once (half_io.cuh), as the CPU's reference
// path runs the float passes on rounded inputs and rounds their outputs. The
// per-channel statistics, parameters and their gradients are float always.
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory; an empty batch writes zero sums.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/batch_norm_ops.h"
#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// The batch: [n, channels, plane] elements of `dtype`.
struct BatchNormDims {
  int64_t n = 0, channels = 0, plane = 1;
  DType dtype = DType::F32;
};

// The per-channel constants of the output and gradient passes.
struct BatchNormStats {
  float* mean;    // [channels]
  float* invstd;  // [channels], 1 / sqrt(var + epsilon)
};

// ------------------------------------------------------------ forward --

// This replica's part of the CPU layer's one round of sums
// (core/nn/layers/batch_norm_moments.h), shifted by K = running_mean:
// shifts[c] = K[c], and sums = [count, count * K, sum (x - K), sum (x - K)^2]
// (1 + 3 * channels), count = n * plane. x - K is a float difference, as on
// the CPU; the squares and the sums are in double.
void batchNormShiftedSums(const void* x, BatchNormDims d, const float* running_mean, float* shifts,
                          double* sums, cudaStream_t stream);
// deviations[c] = sum of (x - mean[c])^2 over channel c (the second round).
void batchNormSquaredDeviations(const void* x, BatchNormDims d, const float* mean, double* deviations,
                                cudaStream_t stream);
// The whole batch's moments = [mean | variance] (channels each, double) from
// its shifted sums (batchNormShiftedSums, shifts = K) on the device, without
// the host: d = sum (x - K) / count, mean = K + d, variance = sum (x - K)^2 /
// count - d^2, clamped at 0 (the single-process path; a reducer's path reads
// the sums on the host and may take a second round instead).
void batchNormMomentsFromShiftedSums(const double* sums, const float* shifts, int64_t channels,
                                     double* moments, cudaStream_t stream);
// From the whole batch's moments = [mean | variance] (channels each, double)
// and its count (> 1), per channel: mean, invstd, scale = gamma * invstd and
// shift = beta (gamma, beta may be null: 1 and 0); when running_mean and
// running_var are non-null they move by `momentum` towards the mean and the
// unbiased variance.
void batchNormBatchStatistics(const double* moments, double count, int64_t channels, double momentum,
                              double epsilon, const float* gamma, const float* beta, float* running_mean,
                              float* running_var, BatchNormStats out, float* scale, float* shift,
                              cudaStream_t stream);
// The statistics an inference pass normalises with, as the CPU layer's:
// mean = running_mean, invstd = 1 / sqrt(running_var + epsilon), and when
// scale and shift are non-null, scale = gamma * invstd and shift = beta
// (gamma, beta may be null: 1 and 0).
void batchNormFrozenStatistics(const float* running_mean, const float* running_var, int64_t channels,
                               double epsilon, const float* gamma, const float* beta, BatchNormStats out,
                               float* scale, float* shift, cudaStream_t stream);
// y = act((x - mean[c]) * scale[c] + shift[c] + residual) (residual, the
// other input of a fused add, may be null: 0), as the CPU's batchNormApply;
// rounded to the dtype once, after the activation.
void batchNormApply(const void* x, void* y, BatchNormDims d, const float* mean, const float* scale,
                    const float* shift, const void* residual, ops::FusedActivation act, cudaStream_t stream);
// y = act(y + residual) over `count` elements of `dtype` (after cuDNN's
// normalisation; residual may be null: 0). In 16 bits y holds cuDNN's
// rounded output, so a residual's sum would be rounded a second time: the
// layer adds none there (see cuda_batch_norm.h). The activation alone
// rounds nothing (relu and relu6 map a 16-bit value to itself, 0 or 6).
void fusedActivationForward(void* y, const void* residual, DType dtype, int64_t count,
                            ops::FusedActivation act, cudaStream_t stream);

// ----------------------------------------------------------- backward --

// g = dy where act at y passes a gradient, else 0 (y > 0 for relu, 0 < y < 6
// for relu6; a copy of dy for None), over `count` elements of `dtype` (dy or
// 0: exact in any dtype). g may equal dy.
void fusedActivationBackward(const void* y, const void* dy, void* g, DType dtype, int64_t count,
                             ops::FusedActivation act, cudaStream_t stream);
// This replica's sums, with g as above: sums[c] = sum of g, sums[channels + c]
// = sum of g * (x - mean[c]); then dgamma[c] += invstd[c] * sums[channels + c]
// and dbeta[c] += sums[c] (each skipped when null).
void batchNormGradSums(const void* x, const void* y, const void* dy, BatchNormDims d,
                       ops::FusedActivation act, BatchNormStats stats, double* sums, float* dgamma,
                       float* dbeta, cudaStream_t stream);
// dx = a * g + b * (x - mean) + c per channel. Training (sums non-null: the
// whole batch's sums of batchNormGradSums; count = stats_count[0], the summed
// count of batchNormShiftedSums):
// a = gamma * invstd, b = -a * invstd^2 * sums[channels + c] / count,
// c = -a * sums[c] / count. Inference (sums null): a = gamma * invstd, b = c = 0.
// gamma may be null (1). dx is computed in float and rounded to the dtype once.
void batchNormInputGrad(const void* x, const void* y, const void* dy, BatchNormDims d,
                        ops::FusedActivation act, BatchNormStats stats, const float* gamma,
                        const double* sums, const double* stats_count, void* dx, cudaStream_t stream);

}  // namespace dtrain::cuda
