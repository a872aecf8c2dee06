// The reductions of elementwise_kernels.h: bias gradients and the sum of
// squares, deterministic (see the header). Each output's elements are split
// into a fixed number of contiguous slices that depends only on the sizes;
// a block sums one slice in double (each thread a fixed subsequence, then a
// fixed tree over the block); with one slice per output the block writes the
// output, otherwise the slices' sums are added in slice order by a second
// kernel. The bias gradients read their element type through half_io.cuh:
// a 16-bit value is exact in float and in double, so its sums are formed as
// a float input's are.
#include <algorithm>

#include "core/backend/cuda/block_sum.cuh"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/stream_scratch.cuh"

namespace dtrain::cuda {

namespace {

constexpr int kReduceThreads = 256;
// Loads each thread issues before adding them: independent loads in flight
// are what a memory-bound reduction needs.
constexpr int kUnroll = 4;
// A slice holds at least this many elements (so splitting pays for itself)...
constexpr int64_t kMinSliceElements = 8192;
// ...and an output is split only while the whole grid has fewer blocks than
// this (enough to fill a large GPU several times over).
constexpr int64_t kTargetBlocks = 2048;
// The bias gradient of a matrix: a block is 32 columns (one warp, so a row's
// loads are coalesced) by kRowThreads rows.
constexpr int kRowLanes = 32;
constexpr int kRowThreads = 8;
constexpr int kRowBlockThreads = kRowLanes * kRowThreads;
constexpr int64_t kMinSliceRows = 256;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Slices per output for `per_output` items, when each slice of the split
// becomes `blocks_per_slice` blocks.
int64_t sliceCount(int64_t per_output, int64_t blocks_per_slice, int64_t min_per_slice) {
  const int64_t by_size = ceilDiv(per_output, min_per_slice);
  const int64_t by_grid = std::max<int64_t>(1, kTargetBlocks / blocks_per_slice);
  return std::max<int64_t>(1, std::min(by_size, by_grid));
}

// ----------------------------------------------------------- the values --

// The bias gradient's term: dy, or 0 where a fused relu's output was not positive.
template <typename T>
struct MaskedGrad {
  const T* dy;
  const T* relu_out;  // may be null
  __device__ double operator()(int64_t k) const {
    return !relu_out || toFloat(relu_out[k]) > 0.0f ? static_cast<double>(toFloat(dy[k])) : 0.0;
  }
};

struct Square {
  const float* x;
  __device__ double operator()(int64_t k) const {
    const double v = x[k];
    return v * v;  // exact in double (a float's square has at most 48 significant bits)
  }
};

// ----------------------------------------------------------- the stores --

// dst[output] += sum, rounded to float once.
struct AddToFloat {
  float* dst;
  __device__ void operator()(int64_t output, int64_t slice, double sum) const {
    dst[output] = static_cast<float>(static_cast<double>(dst[output]) + sum);
  }
};

struct WriteDouble {
  double* dst;
  __device__ void operator()(int64_t output, int64_t slice, double sum) const { dst[output] = sum; }
};

// partials[output][slice] = sum, for addSlicesKernel.
struct WriteSlice {
  double* partials;
  int64_t slices;
  __device__ void operator()(int64_t output, int64_t slice, double sum) const {
    partials[output * slices + slice] = sum;
  }
};

// ----------------------------------------------------------- the kernels --

// For a tensor [outer, groups, plane]: block (g, s) sums value over group g's
// elements numbered [s * per_slice, (s + 1) * per_slice), numbering them
// e = o * plane + pos for element (o, g, pos).
template <class Value, class Store>
__global__ void __launch_bounds__(kReduceThreads)
    groupSumKernel(Value value, int64_t outer, int64_t groups, int64_t plane, int64_t per_slice,
                   Store store) {
  const int64_t g = blockIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * per_slice;
  const int64_t end = min(outer * plane, begin + per_slice);
  int64_t e = begin + threadIdx.x;
  // (o, pos) of e, advanced with e by additions.
  int64_t o = e / plane, pos = e % plane;
  const int64_t step_o = kReduceThreads / plane, step_pos = kReduceThreads % plane;
  auto index = [&] { return (o * groups + g) * plane + pos; };
  auto advance = [&] {
    e += kReduceThreads;
    o += step_o;
    pos += step_pos;
    if (pos >= plane) {
      pos -= plane;
      ++o;
    }
  };
  double acc = 0.0;
  while (e + (kUnroll - 1) * kReduceThreads < end) {
    double v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      v[u] = value(index());
      advance();
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += v[u];
  }
  for (; e < end; advance()) acc += value(index());
  __shared__ double warp_sums[kReduceThreads / 32];
  const double sum = blockSum<kReduceThreads>(acc, warp_sums);
  if (threadIdx.x == 0) store(g, blockIdx.y, sum);
}

// For a matrix [rows, cols]: block (b, s) sums the columns [32 b, 32 b + 32)
// over the rows [s * rows_per_slice, (s + 1) * rows_per_slice).
template <class Value, class Store>
__global__ void __launch_bounds__(kRowBlockThreads)
    rowSumKernel(Value value, int64_t rows, int64_t cols, int64_t rows_per_slice, Store store) {
  __shared__ double partial[kRowThreads][kRowLanes];
  const int64_t c = int64_t(blockIdx.x) * kRowLanes + threadIdx.x;
  const int64_t end = min(rows, int64_t(blockIdx.y) * rows_per_slice + rows_per_slice);
  double acc = 0.0;
  if (c < cols) {
    int64_t r = int64_t(blockIdx.y) * rows_per_slice + threadIdx.y;
    for (; r + (kUnroll - 1) * kRowThreads < end; r += kUnroll * kRowThreads) {
      double v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = value((r + u * kRowThreads) * cols + c);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc += v[u];
    }
    for (; r < end; r += kRowThreads) acc += value(r * cols + c);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double sum = 0.0;
    for (int t = 0; t < kRowThreads; ++t) sum += partial[t][threadIdx.x];
    store(c, blockIdx.y, sum);
  }
}

// Adds each output's slice sums in slice order and stores the total.
template <class Store>
__global__ void addSlicesKernel(const double* partials, int64_t outputs, int64_t slices, Store store) {
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < outputs;
       g += int64_t(gridDim.x) * blockDim.x) {
    double sum = 0.0;
    for (int64_t s = 0; s < slices; ++s) sum += partials[g * slices + s];
    store(g, 0, sum);
  }
}

// ------------------------------------------------------------- launches --

// One output per group of [outer, groups, plane]; plane > 0.
template <class Value, class Store>
void groupSum(Value value, int64_t outer, int64_t groups, int64_t plane, Store store, cudaStream_t stream,
              const char* what) {
  const int64_t count = outer * plane;
  const int64_t per_slice =
      std::max<int64_t>(1, ceilDiv(count, sliceCount(count, groups, kMinSliceElements)));
  const int64_t slices = std::max<int64_t>(1, ceilDiv(count, per_slice));
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(slices));
  if (slices == 1) {
    groupSumKernel<<<grid, kReduceThreads, 0, stream>>>(value, outer, groups, plane, per_slice, store);
    return;
  }
  StreamScratch scratch(static_cast<size_t>(groups * slices) * sizeof(double), stream, what);
  const WriteSlice partials{scratch.as<double>(), slices};
  groupSumKernel<<<grid, kReduceThreads, 0, stream>>>(value, outer, groups, plane, per_slice, partials);
  addSlicesKernel<<<gridStrideBlocks(groups), kElementwiseThreads, 0, stream>>>(partials.partials, groups,
                                                                                slices, store);
}

template <typename T>
void biasGradRowsOf(const T* dy, const T* relu_out, int64_t rows, int64_t cols, float* dbias,
                    cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t column_blocks = ceilDiv(cols, kRowLanes);
  const int64_t rows_per_slice = ceilDiv(rows, sliceCount(rows, column_blocks, kMinSliceRows));
  const int64_t slices = ceilDiv(rows, rows_per_slice);
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(slices));
  const dim3 block(kRowLanes, kRowThreads);
  const MaskedGrad<T> value{dy, relu_out};
  const AddToFloat store{dbias};
  if (slices == 1) {
    rowSumKernel<<<grid, block, 0, stream>>>(value, rows, cols, rows_per_slice, store);
    return;
  }
  StreamScratch scratch(static_cast<size_t>(cols * slices) * sizeof(double), stream, "biasGradRows");
  const WriteSlice partials{scratch.as<double>(), slices};
  rowSumKernel<<<grid, block, 0, stream>>>(value, rows, cols, rows_per_slice, partials);
  addSlicesKernel<<<gridStrideBlocks(cols), kElementwiseThreads, 0, stream>>>(partials.partials, cols, slices,
                                                                              store);
}

template <typename T>
void biasGradPlanesOf(const T* dy, const T* relu_out, int64_t n, int64_t channels, int64_t plane,
                      float* dbias, cudaStream_t stream) {
  if (n <= 0 || channels <= 0 || plane <= 0) return;
  groupSum(MaskedGrad<T>{dy, relu_out}, n, channels, plane, AddToFloat{dbias}, stream, "biasGradPlanes");
}

}  // namespace

void biasGradRows(const float* dy, const float* relu_out, int64_t rows, int64_t cols, float* dbias,
                  cudaStream_t stream) {
  biasGradRowsOf(dy, relu_out, rows, cols, dbias, stream);
}

void biasGradPlanes(const float* dy, const float* relu_out, int64_t n, int64_t channels, int64_t plane,
                    float* dbias, cudaStream_t stream) {
  biasGradPlanesOf(dy, relu_out, n, channels, plane, dbias, stream);
}

void biasGradRows(const void* dy, const void* relu_out, DType dtype, int64_t rows, int64_t cols, float* dbias,
                  cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    biasGradRowsOf(static_cast<const T*>(dy), static_cast<const T*>(relu_out), rows, cols, dbias, stream);
  });
}

void biasGradPlanes(const void* dy, const void* relu_out, DType dtype, int64_t n, int64_t channels,
                    int64_t plane, float* dbias, cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    biasGradPlanesOf(static_cast<const T*>(dy), static_cast<const T*>(relu_out), n, channels, plane, dbias,
                     stream);
  });
}

void sumOfSquares(const float* x, int64_t n, double* out, cudaStream_t stream) {
  groupSum(Square{x}, std::max<int64_t>(n, 0), 1, 1, WriteDouble{out}, stream, "sumOfSquares");
}

}  // namespace dtrain::cuda
