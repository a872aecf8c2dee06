// GELU: one thread per element. Layer normalisation: one warp per row, its
// statistics in float over the row's values as the CPU's (the sums' order
// differs: lanes, then the warp's tree), the parameter gradients summed over
// row slices in double and the slices added in order. Embeddings: a gather,
// and a scatter made deterministic by sorting the tokens by id.
#include <cub/device/device_radix_sort.cuh>

#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/sequence_kernels.h"
#include "core/backend/cuda/stream_scratch.cuh"
#include "core/errors.h"

namespace dtrain::cuda {

namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

__device__ __forceinline__ float geluOf(float x) {
  const float u = kGeluC * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float geluGradOf(float x) {
  const float u = kGeluC * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T>
__global__ void geluForwardKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(geluOf(toFloat(x[i])));
}

template <typename T>
__global__ void geluBackwardKernel(const T* x, const T* dy, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = fromFloat<T>(toFloat(dy[i]) * geluGradOf(toFloat(x[i])));
}

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr int kRowsPerBlock = 8;  // warps per block, a row each

template <typename T>
__global__ void layerNormForwardKernel(const T* x, int64_t rows, int64_t cols, const float* gamma,
                                       const float* beta, float eps, T* y, float* mean, float* rstd) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const T* xr = x + row * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += 32) sum += toFloat(xr[c]);
  const float m = warpSum(sum) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += 32) {
    const float d = toFloat(xr[c]) - m;
    squares += d * d;
  }
  const float r = rsqrtf(warpSum(squares) / static_cast<float>(cols) + eps);
  T* yr = y + row * cols;
  for (int64_t c = threadIdx.x; c < cols; c += 32)
    yr[c] = fromFloat<T>((toFloat(xr[c]) - m) * r * gamma[c] + beta[c]);
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

template <typename T>
__global__ void layerNormInputGradKernel(const T* x, const T* dy, int64_t rows, int64_t cols,
                                         const float* gamma, const float* mean, const float* rstd, T* dx) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const T* xr = x + row * cols;
  const T* dyr = dy + row * cols;
  const float m = mean[row], r = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += 32) {
    const float g = toFloat(dyr[c]) * gamma[c];
    g_sum += g;
    gx_sum += g * (toFloat(xr[c]) - m) * r;
  }
  const float g_mean = warpSum(g_sum) / static_cast<float>(cols);
  const float gx_mean = warpSum(gx_sum) / static_cast<float>(cols);
  T* dxr = dx + row * cols;
  for (int64_t c = threadIdx.x; c < cols; c += 32) {
    const float xhat = (toFloat(xr[c]) - m) * r;
    dxr[c] = fromFloat<T>(r * (toFloat(dyr[c]) * gamma[c] - g_mean - xhat * gx_mean));
  }
}

constexpr int kColumnThreads = 128;
constexpr int64_t kRowsPerSlice = 256;

// partial[slice, c] = sums over the slice's rows of dy xhat and of dy, in double.
template <typename T>
__global__ void layerNormParamSlicesKernel(const T* x, const T* dy, int64_t rows, int64_t cols,
                                           const float* mean, const float* rstd, double* dgamma_part,
                                           double* dbeta_part) {
  const int64_t c = blockIdx.x * int64_t(kColumnThreads) + threadIdx.x;
  if (c >= cols) return;
  const int64_t begin = blockIdx.y * kRowsPerSlice;
  const int64_t end = begin + kRowsPerSlice < rows ? begin + kRowsPerSlice : rows;
  double g = 0.0, b = 0.0;
  for (int64_t r = begin; r < end; ++r) {
    const float d = toFloat(dy[r * cols + c]);
    g += static_cast<double>(d * ((toFloat(x[r * cols + c]) - mean[r]) * rstd[r]));
    b += static_cast<double>(d);
  }
  dgamma_part[blockIdx.y * cols + c] = g;
  dbeta_part[blockIdx.y * cols + c] = b;
}

__global__ void addColumnSlicesKernel(const double* part, int64_t slices, int64_t cols, float* out) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double sum = 0.0;
    for (int64_t s = 0; s < slices; ++s) sum += part[s * cols + c];
    out[c] += static_cast<float>(sum);
  }
}

template <typename T>
__global__ void embeddingForwardKernel(const float* ids, int64_t tokens, const T* table, int64_t dim,
                                       T* out) {
  const int64_t total = tokens * dim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / dim, c = i - t * dim;
    out[i] = table[static_cast<int64_t>(ids[t]) * dim + c];
  }
}

__global__ void idsAndPositionsKernel(const float* ids, int64_t tokens, int32_t* keys, int32_t* positions) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens;
       t += int64_t(gridDim.x) * blockDim.x) {
    keys[t] = static_cast<int32_t>(ids[t]);
    positions[t] = static_cast<int32_t>(t);
  }
}

// Thread (i, c): when sorted position i starts a run of one id, the run's
// tokens' column c summed in position order and added to the id's row.
template <typename T>
__global__ void embeddingRunsKernel(const int32_t* keys, const int32_t* positions, int64_t tokens,
                                    const T* dout, int64_t dim, float* dtable) {
  const int64_t total = tokens * dim;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / dim, c = k - i * dim;
    if (i > 0 && keys[i - 1] == keys[i]) continue;
    float sum = 0.0f;
    for (int64_t j = i; j < tokens && keys[j] == keys[i]; ++j)
      sum += toFloat(dout[static_cast<int64_t>(positions[j]) * dim + c]);
    dtable[static_cast<int64_t>(keys[i]) * dim + c] += sum;
  }
}

template <typename T>
__global__ void positionForwardKernel(const T* x, const float* table, int64_t n, int64_t per_sample, T* y) {
  const int64_t total = n * per_sample;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(toFloat(x[i]) + table[i % per_sample]);
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void geluForward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    geluForwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                                  static_cast<T*>(y), n);
  });
}

void geluBackward(const void* x, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    geluBackwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
}

void layerNormForward(const void* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                      float eps, void* y, float* mean, float* rstd, DType dtype, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 block(32, kRowsPerBlock);
  const auto blocks = static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock));
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    layerNormForwardKernel<T><<<blocks, block, 0, stream>>>(static_cast<const T*>(x), rows, cols, gamma, beta,
                                                            eps, static_cast<T*>(y), mean, rstd);
  });
}

void layerNormBackward(const void* x, const void* dy, int64_t rows, int64_t cols, const float* gamma,
                       const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta,
                       DType dtype, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t slices = ceilDiv(rows, kRowsPerSlice);
  StreamScratch scratch(static_cast<size_t>(2 * slices * cols) * sizeof(double), stream, "layerNormBackward");
  double* dgamma_part = scratch.as<double>();
  double* dbeta_part = dgamma_part + slices * cols;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    if (dx) {
      const dim3 block(32, kRowsPerBlock);
      layerNormInputGradKernel<T><<<static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock)), block, 0, stream>>>(
          xt, dyt, rows, cols, gamma, mean, rstd, static_cast<T*>(dx));
    }
    const dim3 grid(static_cast<unsigned>(ceilDiv(cols, kColumnThreads)), static_cast<unsigned>(slices));
    layerNormParamSlicesKernel<T>
        <<<grid, kColumnThreads, 0, stream>>>(xt, dyt, rows, cols, mean, rstd, dgamma_part, dbeta_part);
  });
  addColumnSlicesKernel<<<gridStrideBlocks(cols), kElementwiseThreads, 0, stream>>>(dgamma_part, slices, cols,
                                                                                    dgamma);
  addColumnSlicesKernel<<<gridStrideBlocks(cols), kElementwiseThreads, 0, stream>>>(dbeta_part, slices, cols,
                                                                                    dbeta);
}

void embeddingForward(const float* ids, int64_t tokens, const void* table, int64_t dim, void* out,
                      DType dtype, cudaStream_t stream) {
  if (tokens <= 0 || dim <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    embeddingForwardKernel<T><<<gridStrideBlocks(tokens * dim), kElementwiseThreads, 0, stream>>>(
        ids, tokens, static_cast<const T*>(table), dim, static_cast<T*>(out));
  });
}

void embeddingBackward(const float* ids, int64_t tokens, const void* dout, int64_t dim, int64_t vocab,
                       float* dtable, DType dtype, cudaStream_t stream) {
  if (tokens <= 0 || dim <= 0) return;
  if (tokens > INT32_MAX || vocab > INT32_MAX)
    throw Error("embeddingBackward: more than 2^31 tokens or ids in one call");
  const auto n = static_cast<int>(tokens);
  // Only the bits an id below `vocab` can have.
  int end_bit = 1;
  while (end_bit < 31 && (int64_t{1} << end_bit) < vocab) ++end_bit;
  // CUB's scratch first (the allocation's aligned start), then the keys and
  // positions and their sorted copies.
  size_t sort_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), n, 0, end_bit, stream);
  const size_t lists_at = (sort_bytes + 255) / 256 * 256;
  StreamScratch scratch(lists_at + 4 * static_cast<size_t>(n) * sizeof(int32_t), stream, "embeddingBackward");
  void* sort_scratch = scratch.as<char>();
  int32_t* keys = reinterpret_cast<int32_t*>(scratch.as<char>() + lists_at);
  int32_t* positions = keys + n;
  int32_t* sorted_keys = positions + n;
  int32_t* sorted_positions = sorted_keys + n;
  idsAndPositionsKernel<<<gridStrideBlocks(tokens), kElementwiseThreads, 0, stream>>>(ids, tokens, keys,
                                                                                      positions);
  cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, keys, sorted_keys, positions, sorted_positions, n,
                                  0, end_bit, stream);
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    embeddingRunsKernel<T><<<gridStrideBlocks(tokens * dim), kElementwiseThreads, 0, stream>>>(
        sorted_keys, sorted_positions, tokens, static_cast<const T*>(dout), dim, dtable);
  });
}

void positionEmbeddingForward(const void* x, const float* table, int64_t n, int64_t per_sample, void* y,
                              DType dtype, cudaStream_t stream) {
  if (n <= 0 || per_sample <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    positionForwardKernel<T><<<gridStrideBlocks(n * per_sample), kElementwiseThreads, 0, stream>>>(
        static_cast<const T*>(x), table, n, per_sample, static_cast<T*>(y));
  });
}

}  // namespace dtrain::cuda
