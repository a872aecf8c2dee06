// The kernels of batch_norm_kernels.h: per-channel reductions (a slice per
// block, then the slices added in order) and element-wise passes
// (grid-stride loops that follow each element's channel with a GroupCursor).
// A reduction block reads its channel's values in order, coalesced along a
// plane; [C] samples (plane 1) are read with a stride of C, which their
// small size (features after a dense layer) makes affordable.
//
// Each kernel is a template on T, the element type of the batch's tensors
// (float, __nv_bfloat16, __half): it loads them with toFloat and stores with
// fromFloat<T> (half_io.cuh) and is otherwise the float kernel, so T = float
// compiles to the same arithmetic as before 16-bit tensors existed. The
// public functions pick T from BatchNormDims::dtype (withElementType).
#include <algorithm>

#include "core/backend/cuda/batch_norm_kernels.h"
#include "core/backend/cuda/block_sum.cuh"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/stream_scratch.cuh"

namespace dtrain::cuda {

namespace {

using ops::activate;
using ops::FusedActivation;
using ops::maskGrad;
using ops::withActivation;

constexpr int kReduceThreads = 256;
// A slice holds at least this many values (splitting smaller ones costs more
// than it gains)...
constexpr int64_t kMinSliceValues = 4096;
// ...and a channel is split only while the grid has fewer blocks than this.
constexpr int64_t kTargetBlocks = 2048;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ------------------------------------------------- per-channel terms --
// A term gives K doubles per element: at(c) fixes its channel's constants,
// then value(index, out) fills out[0..K) for element `index`. A 16-bit
// element is exact as a float, so each term is the float term of the
// rounded values, as the CPU's reference path sums them.

// x - K and its square; the difference in float as the CPU's
// channelShiftedMoments takes it (exact for x near K).
template <typename T>
struct ShiftedMomentsTerm {
  static constexpr int K = 2;
  const T* x;
  const float* shifts;
  float shift = 0.0f;
  __device__ void at(int64_t c) { shift = shifts[c]; }
  __device__ void value(int64_t i, double* out) const {
    const double d = toFloat(x[i]) - shift;
    out[0] = d;
    out[1] = d * d;
  }
};

template <typename T>
struct SquaredDeviationTerm {
  static constexpr int K = 1;
  const T* x;
  const float* means;
  float mean = 0.0f;
  __device__ void at(int64_t c) { mean = means[c]; }
  __device__ void value(int64_t i, double* out) const {
    const double d = toFloat(x[i]) - mean;
    out[0] = d * d;
  }
};

template <typename T, FusedActivation A>
struct GradTerm {
  static constexpr int K = 2;
  const T *x, *y, *dy;
  const float* means;
  float mean = 0.0f;
  __device__ void at(int64_t c) { mean = means[c]; }
  __device__ void value(int64_t i, double* out) const {
    const float g = maskGrad<A>(A == FusedActivation::None ? 0.0f : toFloat(y[i]), toFloat(dy[i]));
    out[0] = g;
    out[1] = static_cast<double>(g) * static_cast<double>(toFloat(x[i]) - mean);
  }
};

// ------------------------------------------------------- reductions --

// Block (c, s) sums the term over channel c's values numbered
// [s * per_slice, (s + 1) * per_slice), value e being (sample e / plane,
// position e % plane), into partials[(k * channels + c) * slices + s].
template <class Term>
__global__ void __launch_bounds__(kReduceThreads)
    channelPartialsKernel(Term term, BatchNormDims d, int64_t per_slice, double* partials) {
  __shared__ double warp_sums[kReduceThreads / 32];
  const int64_t c = blockIdx.x, slices = gridDim.y;
  term.at(c);
  const int64_t begin = int64_t(blockIdx.y) * per_slice;
  const int64_t end = min(d.n * d.plane, begin + per_slice);
  int64_t e = begin + threadIdx.x;
  // (sample, position) of e, advanced with e by additions.
  int64_t sample = e / d.plane, pos = e % d.plane;
  const int64_t step_sample = kReduceThreads / d.plane, step_pos = kReduceThreads % d.plane;
  double acc[Term::K] = {};
  for (; e < end; e += kReduceThreads) {
    double v[Term::K];
    term.value((sample * d.channels + c) * d.plane + pos, v);
#pragma unroll
    for (int k = 0; k < Term::K; ++k) acc[k] += v[k];
    sample += step_sample;
    pos += step_pos;
    if (pos >= d.plane) {
      pos -= d.plane;
      ++sample;
    }
  }
#pragma unroll
  for (int k = 0; k < Term::K; ++k) {
    const double sum = blockSum<kReduceThreads>(acc[k], warp_sums);
    if (threadIdx.x == 0) partials[(k * d.channels + c) * slices + blockIdx.y] = sum;
  }
}

// Adds each channel's slices in order and hands the K totals to `finish`.
template <int K, class Finish>
__global__ void finishChannelsKernel(const double* partials, int64_t channels, int64_t slices,
                                     Finish finish) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    double total[K];
    for (int k = 0; k < K; ++k) {
      double sum = 0.0;
      for (int64_t s = 0; s < slices; ++s) sum += partials[(k * channels + c) * slices + s];
      total[k] = sum;
    }
    finish(c, total);
  }
}

// [count, count * K, sum (x - K), sum (x - K)^2], and K itself for the host.
struct FinishShiftedSums {
  const float* running_mean;
  float* shifts;
  double* sums;
  int64_t channels;
  double count;
  __device__ void operator()(int64_t c, const double* total) const {
    const float k = running_mean[c];
    if (c == 0) sums[0] = count;
    shifts[c] = k;
    sums[1 + c] = count * static_cast<double>(k);  // rounded as the CPU's: one product in double
    sums[1 + channels + c] = total[0];
    sums[1 + 2 * channels + c] = total[1];
  }
};

struct FinishDeviations {
  double* deviations;
  __device__ void operator()(int64_t c, const double* total) const { deviations[c] = total[0]; }
};

struct FinishGradSums {
  double* sums;
  int64_t channels;
  const float* invstd;
  float *dgamma, *dbeta;
  __device__ void operator()(int64_t c, const double* total) const {
    sums[c] = total[0];
    sums[channels + c] = total[1];
    if (dgamma) dgamma[c] += static_cast<float>(invstd[c] * total[1]);
    if (dbeta) dbeta[c] += static_cast<float>(total[0]);
  }
};

// Per-channel sums of `term` over the batch, handed to `finish`.
template <class Term, class Finish>
void channelReduce(Term term, BatchNormDims d, Finish finish, cudaStream_t stream, const char* what) {
  if (d.channels <= 0) return;
  const int64_t values = d.n * d.plane;
  const int64_t by_size = ceilDiv(values, kMinSliceValues);
  const int64_t by_grid = std::max<int64_t>(1, kTargetBlocks / d.channels);
  const int64_t wanted = std::max<int64_t>(1, std::min(by_size, by_grid));
  const int64_t per_slice = std::max<int64_t>(1, ceilDiv(values, wanted));
  const int64_t slices = std::max<int64_t>(1, ceilDiv(values, per_slice));
  StreamScratch partials(static_cast<size_t>(Term::K * d.channels * slices) * sizeof(double), stream, what);
  const dim3 grid(static_cast<unsigned>(d.channels), static_cast<unsigned>(slices));
  channelPartialsKernel<<<grid, kReduceThreads, 0, stream>>>(term, d, per_slice, partials.as<double>());
  finishChannelsKernel<Term::K><<<gridStrideBlocks(d.channels), kElementwiseThreads, 0, stream>>>(
      partials.as<double>(), d.channels, slices, finish);
}

// ------------------------------------------------- per-channel maths --

// One round in double is enough here, unlike the reducer's path, which
// matches the CPU layer's second round bit for bit: the sums of (x - K) and
// (x - K)^2 are double, so the subtraction S2/N - d^2 loses about d^2/var *
// 1e-16 relative, negligible until K lies 10^4 standard deviations from the
// mean; the float differences x - K add at most about 6e-8 * |d| / sigma,
// below the float output's own rounding while K is within ~10 standard
// deviations of the mean (the running mean is, after the first steps). The
// clamp keeps a variance that rounded below 0 from making a NaN invstd.
__global__ void momentsFromShiftedSumsKernel(const double* sums, const float* shifts, int64_t channels,
                                             double* moments) {
  const double count = sums[0];
  const double* shifted = sums + 1 + channels;
  const double* squares = shifted + channels;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const double d = shifted[c] / count;
    moments[c] = static_cast<double>(shifts[c]) + d;
    moments[channels + c] = fmax(squares[c] / count - d * d, 0.0);
  }
}

__global__ void batchStatisticsKernel(const double* moments, double count, int64_t channels, double momentum,
                                      double epsilon, const float* gamma, const float* beta,
                                      float* running_mean, float* running_var, BatchNormStats out,
                                      float* scale, float* shift) {
  const double unbiased = count / (count - 1.0);
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const double mean = moments[c], var = moments[channels + c];
    const float invstd = static_cast<float>(1.0 / sqrt(var + epsilon));
    out.mean[c] = static_cast<float>(mean);
    out.invstd[c] = invstd;
    scale[c] = gamma ? gamma[c] * invstd : invstd;
    shift[c] = beta ? beta[c] : 0.0f;
    if (running_mean && running_var) {
      running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * var * unbiased);
    }
  }
}

__global__ void frozenStatisticsKernel(const float* running_mean, const float* running_var, int64_t channels,
                                       double epsilon, const float* gamma, const float* beta,
                                       BatchNormStats out, float* scale, float* shift) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const float invstd = static_cast<float>(1.0 / sqrt(static_cast<double>(running_var[c]) + epsilon));
    out.mean[c] = running_mean[c];
    out.invstd[c] = invstd;
    if (scale) scale[c] = gamma ? gamma[c] * invstd : invstd;
    if (shift) shift[c] = beta ? beta[c] : 0.0f;
  }
}

// coefficients = [a | b | c], each [channels]; see batchNormInputGrad.
__global__ void inputGradCoefficientsKernel(BatchNormStats stats, const float* gamma, const double* sums,
                                            const double* stats_count, int64_t channels,
                                            float* coefficients) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const double r = stats.invstd[c], a = (gamma ? gamma[c] : 1.0) * r;
    coefficients[c] = static_cast<float>(a);
    if (sums) {
      const double count = stats_count[0];
      coefficients[channels + c] = static_cast<float>(-a * r * r * sums[channels + c] / count);
      coefficients[2 * channels + c] = static_cast<float>(-a * sums[c] / count);
    } else {
      coefficients[channels + c] = 0.0f;
      coefficients[2 * channels + c] = 0.0f;
    }
  }
}

// ------------------------------------------------------ element-wise --

// The normalised value is rounded to float before the residual is added, as
// an unfused add would see it; the result is rounded to T once, at the store
// (the CPU's reference path rounds the fused layer's output alone).
template <typename T, FusedActivation A, bool Residual>
__global__ void applyKernel(const T* x, T* y, BatchNormDims d, const float* mean, const float* scale,
                            const float* shift, const T* residual) {
  const int64_t total = d.n * d.channels * d.plane, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  GroupCursor at(i, stride, d.plane, d.channels);
  for (; i < total; i += stride, at.advance()) {
    const int64_t c = at.group;
    const float v = (toFloat(x[i]) - mean[c]) * scale[c] + shift[c];
    y[i] = fromFloat<T>(activate<A>(Residual ? v + toFloat(residual[i]) : v));
  }
}

template <typename T, FusedActivation A, bool Residual>
__global__ void activationKernel(T* y, const T* residual, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = toFloat(y[i]);
    y[i] = fromFloat<T>(activate<A>(Residual ? v + toFloat(residual[i]) : v));
  }
}

template <typename T, FusedActivation A>
__global__ void maskKernel(const T* y, const T* dy, T* g, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    g[i] = fromFloat<T>(maskGrad<A>(A == FusedActivation::None ? 0.0f : toFloat(y[i]), toFloat(dy[i])));
}

template <typename T, FusedActivation A>
__global__ void inputGradKernel(const T* x, const T* y, const T* dy, BatchNormDims d, const float* mean,
                                const float* coefficients, T* dx) {
  const int64_t total = d.n * d.channels * d.plane, stride = int64_t(gridDim.x) * blockDim.x;
  const float* a = coefficients;
  const float* b = coefficients + d.channels;
  const float* k = coefficients + 2 * d.channels;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  GroupCursor at(i, stride, d.plane, d.channels);
  for (; i < total; i += stride, at.advance()) {
    const int64_t c = at.group;
    const float g = maskGrad<A>(A == FusedActivation::None ? 0.0f : toFloat(y[i]), toFloat(dy[i]));
    dx[i] = fromFloat<T>(a[c] * g + b[c] * (toFloat(x[i]) - mean[c]) + k[c]);
  }
}

}  // namespace

void batchNormShiftedSums(const void* x, BatchNormDims d, const float* running_mean, float* shifts,
                          double* sums, cudaStream_t stream) {
  const FinishShiftedSums finish{running_mean, shifts, sums, d.channels, static_cast<double>(d.n * d.plane)};
  withElementType(d.dtype, [&](auto e) {
    using T = decltype(e);
    channelReduce(ShiftedMomentsTerm<T>{static_cast<const T*>(x), running_mean}, d, finish, stream,
                  "batchNormShiftedSums");
  });
}

void batchNormSquaredDeviations(const void* x, BatchNormDims d, const float* mean, double* deviations,
                                cudaStream_t stream) {
  withElementType(d.dtype, [&](auto e) {
    using T = decltype(e);
    channelReduce(SquaredDeviationTerm<T>{static_cast<const T*>(x), mean}, d, FinishDeviations{deviations},
                  stream, "batchNormSquaredDeviations");
  });
}

void batchNormMomentsFromShiftedSums(const double* sums, const float* shifts, int64_t channels,
                                     double* moments, cudaStream_t stream) {
  if (channels <= 0) return;
  momentsFromShiftedSumsKernel<<<gridStrideBlocks(channels), kElementwiseThreads, 0, stream>>>(
      sums, shifts, channels, moments);
}

void batchNormBatchStatistics(const double* moments, double count, int64_t channels, double momentum,
                              double epsilon, const float* gamma, const float* beta, float* running_mean,
                              float* running_var, BatchNormStats out, float* scale, float* shift,
                              cudaStream_t stream) {
  if (channels <= 0) return;
  batchStatisticsKernel<<<gridStrideBlocks(channels), kElementwiseThreads, 0, stream>>>(
      moments, count, channels, momentum, epsilon, gamma, beta, running_mean, running_var, out, scale, shift);
}

void batchNormFrozenStatistics(const float* running_mean, const float* running_var, int64_t channels,
                               double epsilon, const float* gamma, const float* beta, BatchNormStats out,
                               float* scale, float* shift, cudaStream_t stream) {
  if (channels <= 0) return;
  frozenStatisticsKernel<<<gridStrideBlocks(channels), kElementwiseThreads, 0, stream>>>(
      running_mean, running_var, channels, epsilon, gamma, beta, out, scale, shift);
}

void batchNormApply(const void* x, void* y, BatchNormDims d, const float* mean, const float* scale,
                    const float* shift, const void* residual, FusedActivation act, cudaStream_t stream) {
  const int64_t total = d.n * d.channels * d.plane;
  if (total <= 0) return;
  withElementType(d.dtype, [&](auto e) {
    using T = decltype(e);
    const T* xt = static_cast<const T*>(x);
    const T* rt = static_cast<const T*>(residual);
    T* yt = static_cast<T*>(y);
    withActivation(act, [&](auto a) {
      constexpr FusedActivation A = decltype(a)::value;
      const unsigned blocks = gridStrideBlocks(total);
      if (rt)
        applyKernel<T, A, true>
            <<<blocks, kElementwiseThreads, 0, stream>>>(xt, yt, d, mean, scale, shift, rt);
      else
        applyKernel<T, A, false>
            <<<blocks, kElementwiseThreads, 0, stream>>>(xt, yt, d, mean, scale, shift, nullptr);
    });
  });
}

void fusedActivationForward(void* y, const void* residual, DType dtype, int64_t count, FusedActivation act,
                            cudaStream_t stream) {
  if (count <= 0 || (act == FusedActivation::None && !residual)) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    const T* rt = static_cast<const T*>(residual);
    T* yt = static_cast<T*>(y);
    withActivation(act, [&](auto a) {
      constexpr FusedActivation A = decltype(a)::value;
      const unsigned blocks = gridStrideBlocks(count);
      if (rt)
        activationKernel<T, A, true><<<blocks, kElementwiseThreads, 0, stream>>>(yt, rt, count);
      else
        activationKernel<T, A, false><<<blocks, kElementwiseThreads, 0, stream>>>(yt, nullptr, count);
    });
  });
}

void fusedActivationBackward(const void* y, const void* dy, void* g, DType dtype, int64_t count,
                             FusedActivation act, cudaStream_t stream) {
  if (count <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    withActivation(act, [&](auto a) {
      maskKernel<T, decltype(a)::value><<<gridStrideBlocks(count), kElementwiseThreads, 0, stream>>>(
          static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(g), count);
    });
  });
}

void batchNormGradSums(const void* x, const void* y, const void* dy, BatchNormDims d, FusedActivation act,
                       BatchNormStats stats, double* sums, float* dgamma, float* dbeta, cudaStream_t stream) {
  const FinishGradSums finish{sums, d.channels, stats.invstd, dgamma, dbeta};
  withElementType(d.dtype, [&](auto e) {
    using T = decltype(e);
    withActivation(act, [&](auto a) {
      const GradTerm<T, decltype(a)::value> term{static_cast<const T*>(x), static_cast<const T*>(y),
                                                 static_cast<const T*>(dy), stats.mean};
      channelReduce(term, d, finish, stream, "batchNormGradSums");
    });
  });
}

void batchNormInputGrad(const void* x, const void* y, const void* dy, BatchNormDims d, FusedActivation act,
                        BatchNormStats stats, const float* gamma, const double* sums,
                        const double* stats_count, void* dx, cudaStream_t stream) {
  const int64_t total = d.n * d.channels * d.plane;
  if (total <= 0) return;
  StreamScratch coefficients(static_cast<size_t>(3 * d.channels) * sizeof(float), stream,
                             "batchNormInputGrad");
  inputGradCoefficientsKernel<<<gridStrideBlocks(d.channels), kElementwiseThreads, 0, stream>>>(
      stats, gamma, sums, stats_count, d.channels, coefficients.as<float>());
  withElementType(d.dtype, [&](auto e) {
    using T = decltype(e);
    withActivation(act, [&](auto a) {
      inputGradKernel<T, decltype(a)::value><<<gridStrideBlocks(total), kElementwiseThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy), d, stats.mean,
          coefficients.as<float>(), static_cast<T*>(dx));
    });
  });
}

}  // namespace dtrain::cuda
