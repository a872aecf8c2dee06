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
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory; an empty batch writes zero sums.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/batch_norm_ops.h"

namespace dtrain::cuda {

struct BatchNormDims {
  int64_t n = 0, channels = 0, plane = 1;
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
void batchNormShiftedSums(const float* x, BatchNormDims d, const float* running_mean, float* shifts,
                          double* sums, cudaStream_t stream);
// deviations[c] = sum of (x - mean[c])^2 over channel c (the second round).
void batchNormSquaredDeviations(const float* x, BatchNormDims d, const float* mean, double* deviations,
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
// The statistics an inference pass normalised with: mean = running_mean,
// invstd = 1 / sqrt(running_var + epsilon).
void batchNormFrozenStatistics(const float* running_mean, const float* running_var, int64_t channels,
                               double epsilon, BatchNormStats out, cudaStream_t stream);
// y = act((x - mean[c]) * scale[c] + shift[c] + residual) (residual, the
// other input of a fused add, may be null: 0), as the CPU's batchNormApply.
void batchNormApply(const float* x, float* y, BatchNormDims d, const float* mean, const float* scale,
                    const float* shift, const float* residual, ops::FusedActivation act, cudaStream_t stream);
// y = act(y + residual) over `count` elements (after cuDNN's normalisation;
// residual may be null: 0).
void fusedActivationForward(float* y, const float* residual, int64_t count, ops::FusedActivation act,
                            cudaStream_t stream);

// ----------------------------------------------------------- backward --

// g = dy where act at y passes a gradient, else 0 (y > 0 for relu, 0 < y < 6
// for relu6; a copy of dy for None). g may equal dy.
void fusedActivationBackward(const float* y, const float* dy, float* g, int64_t count,
                             ops::FusedActivation act, cudaStream_t stream);
// This replica's sums, with g as above: sums[c] = sum of g, sums[channels + c]
// = sum of g * (x - mean[c]); then dgamma[c] += invstd[c] * sums[channels + c]
// and dbeta[c] += sums[c] (each skipped when null).
void batchNormGradSums(const float* x, const float* y, const float* dy, BatchNormDims d,
                       ops::FusedActivation act, BatchNormStats stats, double* sums, float* dgamma,
                       float* dbeta, cudaStream_t stream);
// dx = a * g + b * (x - mean) + c per channel. Training (sums non-null: the
// whole batch's sums of batchNormGradSums; count = stats_count[0], the summed
// count of batchNormShiftedSums):
// a = gamma * invstd, b = -a * invstd^2 * sums[channels + c] / count,
// c = -a * sums[c] / count. Inference (sums null): a = gamma * invstd, b = c = 0.
// gamma may be null (1).
void batchNormInputGrad(const float* x, const float* y, const float* dy, BatchNormDims d,
                        ops::FusedActivation act, BatchNormStats stats, const float* gamma,
                        const double* sums, const double* stats_count, float* dx, cudaStream_t stream);

}  // namespace dtrain::cuda
