// One warp per row: a block of kWarps warps takes kWarps consecutive rows of
// one head of one sample, and the tiles of the other side (keys and values
// for the query rows; queries, output gradients and row statistics for the
// key rows) pass through shared memory, kTile rows at a time, each tile read
// once per block. Lane l holds dimensions l, l + 32, ... of its row (E of
// them, E = ceil(head_dim / 32) <= 4).
#include <cfloat>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/backend/cuda/attention_kernels.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/stream_scratch.cuh"
#include "core/backend/dropout_mask.h"
#include "core/errors.h"

namespace dtrain::cuda {

namespace {

constexpr int kWarps = 8;  // rows per block
constexpr int kTile = 32;  // rows of the other side per shared-memory tile
constexpr int kMaxDim = 128;

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

struct Geometry {
  int64_t batch, seq, heads, dim, channels;  // channels = heads * dim
  float scale;
  // Dropout of the probabilities: threshold 0 keeps everything.
  uint64_t seed;
  uint32_t threshold;
  float keep_scale;
  int64_t sample_offset;
};

// Row `i` of sample b: where its q (part 0), k (1) or v (2) of head h start.
__device__ __forceinline__ int64_t qkvAt(const Geometry& g, int64_t b, int64_t i, int part, int64_t h) {
  return (b * g.seq + i) * 3 * g.channels + part * g.channels + h * g.dim;
}
__device__ __forceinline__ int64_t outAt(const Geometry& g, int64_t b, int64_t i, int64_t h) {
  return (b * g.seq + i) * g.channels + h * g.dim;
}

// Loads `rows` rows (from row `first`) of width dim into a [kTile][kMaxDim] tile.
template <typename T>
__device__ void loadTile(float (*tile)[kMaxDim], const T* base, int64_t row_stride, int64_t first,
                         int64_t rows, int64_t dim) {
  const int threads = blockDim.x * blockDim.y;
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  for (int64_t k = t; k < kTile * dim; k += threads) {
    const int64_t r = k / dim, c = k - r * dim;
    tile[r][c] = r < rows ? toFloat(base[(first + r) * row_stride + c]) : 0.0f;
  }
}

// A warp's row in registers: lane l holds dimensions l, l + 32, ... (zeros
// past dim, and for a row past the sequence's end).
template <int E, typename T>
__device__ __forceinline__ void loadRow(float (&r)[E], const T* row, bool valid, int64_t dim) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int64_t c = threadIdx.x + 32 * e;
    r[e] = valid && c < dim ? toFloat(row[c]) : 0.0f;
  }
}

template <int E, typename T>
__device__ __forceinline__ void storeRow(T* row, const float (&r)[E], float factor, int64_t dim) {
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (threadIdx.x + 32 * e < dim) row[threadIdx.x + 32 * e] = fromFloat<T>(r[e] * factor);
}

// This lane's part of the dot product of a register row with a tile's row.
template <int E>
__device__ __forceinline__ float lanePart(const float (&r)[E], const float* tile_row, int64_t dim) {
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (threadIdx.x + 32 * e < dim) sum += r[e] * tile_row[threadIdx.x + 32 * e];
  return sum;
}

// acc = acc * decay + a * tile_row over the lane's dimensions.
template <int E>
__device__ __forceinline__ void addScaled(float (&acc)[E], float decay, float a, const float* tile_row,
                                          int64_t dim) {
#pragma unroll
  for (int e = 0; e < E; ++e)
    acc[e] = acc[e] * decay + (threadIdx.x + 32 * e < dim ? a * tile_row[threadIdx.x + 32 * e] : 0.0f);
}

// Whether dropout keeps key j of the query row with key `row_key` (always
// without dropout), and x as the kept or dropped probability carries it.
__device__ __forceinline__ bool keeps(const Geometry& g, uint64_t row_key, int64_t j) {
  return g.threshold == 0 || dropout_mask::keep(row_key, j, g.threshold);
}
__device__ __forceinline__ float dropped(const Geometry& g, float x, bool keep) {
  return g.threshold == 0 ? x : (keep ? x * g.keep_scale : 0.0f);
}

// The dropout mask's key of query row i of head h of sample b (0 without dropout).
__device__ __forceinline__ uint64_t rowKeyOf(const Geometry& g, int64_t b, int64_t h, int64_t i) {
  return g.threshold ? ops::attentionRowKey(g.seed, g.sample_offset + b, h, i) : 0;
}

// The keys the block's query rows see (0 up to its last row), kTile at a
// time: the block loads each tile's keys and values into ks and vs, then
// visit(jj, j) runs for this warp's keys j <= i, in order (jj: j's row in the
// tile). Every thread of the block calls it: it synchronises the block.
template <typename T, typename Visit>
__device__ void forEachCausalKey(const Geometry& g, const T* qkv, int64_t b, int64_t h, int64_t first_row,
                                 int64_t i, bool row_valid, float (*ks)[kMaxDim], float (*vs)[kMaxDim],
                                 Visit&& visit) {
  const int64_t keys = first_row + kWarps < g.seq ? first_row + kWarps : g.seq;
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const int64_t rows = keys - j0 < kTile ? keys - j0 : kTile;
    __syncthreads();
    loadTile(ks, qkv + qkvAt(g, b, 0, 1, h), 3 * g.channels, j0, rows, g.dim);
    loadTile(vs, qkv + qkvAt(g, b, 0, 2, h), 3 * g.channels, j0, rows, g.dim);
    __syncthreads();
    if (!row_valid) continue;
    for (int jj = 0; jj < rows && j0 + jj <= i; ++jj) visit(jj, j0 + jj);
  }
}

template <typename T, int E>
__global__ void forwardKernel(Geometry g, const T* qkv, T* out, float* lse) {
  __shared__ float ks[kTile][kMaxDim];
  __shared__ float vs[kTile][kMaxDim];
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t first_row = blockIdx.x * int64_t(kWarps);
  const int64_t i = first_row + threadIdx.y;
  const bool row_valid = i < g.seq;
  float q[E], acc[E] = {};
  loadRow(q, qkv + qkvAt(g, b, row_valid ? i : 0, 0, h), row_valid, g.dim);
  float m = -FLT_MAX, l = 0.0f;
  const uint64_t row_key = rowKeyOf(g, b, h, row_valid ? i : 0);
  forEachCausalKey(g, qkv, b, h, first_row, i, row_valid, ks, vs, [&](int jj, int64_t j) {
    const float s = warpSum(lanePart(q, ks[jj], g.dim)) * g.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);
    const float p = expf(s - m_new);
    l = l * correction + p;
    addScaled(acc, correction, dropped(g, p, keeps(g, row_key, j)), vs[jj], g.dim);
    m = m_new;
  });
  if (!row_valid) return;
  storeRow(out + outAt(g, b, i, h), acc, 1.0f / l, g.dim);
  if (threadIdx.x == 0) lse[(b * g.heads + h) * g.seq + i] = m + logf(l);
}

// d[b, h, i] = dout_i . out_i over the head's dimensions.
template <typename T>
__global__ void rowDotKernel(Geometry g, const T* out, const T* dout, float* d) {
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t i = blockIdx.x * int64_t(kWarps) + threadIdx.y;
  if (i >= g.seq) return;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < g.dim; c += 32)
    sum += toFloat(out[outAt(g, b, i, h) + c]) * toFloat(dout[outAt(g, b, i, h) + c]);
  sum = warpSum(sum);
  if (threadIdx.x == 0) d[(b * g.heads + h) * g.seq + i] = sum;
}

// dq_i = scale sum_{j <= i} ds_ij k_j, ds_ij = p_ij (z_ij dout_i . v_j - d_i).
template <typename T, int E>
__global__ void queryGradKernel(Geometry g, const T* qkv, const T* dout, const float* lse, const float* d,
                                T* dqkv) {
  __shared__ float ks[kTile][kMaxDim];
  __shared__ float vs[kTile][kMaxDim];
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t first_row = blockIdx.x * int64_t(kWarps);
  const int64_t i = first_row + threadIdx.y;
  const bool row_valid = i < g.seq;
  const int64_t row = row_valid ? i : 0;
  float q[E], go[E], dq[E] = {};
  loadRow(q, qkv + qkvAt(g, b, row, 0, h), row_valid, g.dim);
  loadRow(go, dout + outAt(g, b, row, h), row_valid, g.dim);
  const int64_t stat = (b * g.heads + h) * g.seq + row;
  const float row_lse = lse[stat], row_d = d[stat];
  const uint64_t row_key = rowKeyOf(g, b, h, row);
  forEachCausalKey(g, qkv, b, h, first_row, i, row_valid, ks, vs, [&](int jj, int64_t j) {
    const float p = expf(warpSum(lanePart(q, ks[jj], g.dim)) * g.scale - row_lse);
    const float dp = dropped(g, warpSum(lanePart(go, vs[jj], g.dim)), keeps(g, row_key, j));
    addScaled(dq, 1.0f, p * (dp - row_d) * g.scale, ks[jj], g.dim);
  });
  if (!row_valid) return;
  storeRow(dqkv + qkvAt(g, b, i, 0, h), dq, 1.0f, g.dim);
}

// For key row j: dv_j = sum_{i >= j} z_ij p_ij dout_i, dk_j = scale sum_{i >= j} ds_ij q_i.
template <typename T, int E>
__global__ void keyGradKernel(Geometry g, const T* qkv, const T* dout, const float* lse, const float* d,
                              T* dqkv) {
  __shared__ float qs[kTile][kMaxDim];
  __shared__ float gs[kTile][kMaxDim];
  __shared__ float lses[kTile], ds_row[kTile];
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t first_key = blockIdx.x * int64_t(kWarps);
  const int64_t j = first_key + threadIdx.y;
  const bool key_valid = j < g.seq;
  float k[E], v[E], dk[E] = {}, dv[E] = {};
  loadRow(k, qkv + qkvAt(g, b, key_valid ? j : 0, 1, h), key_valid, g.dim);
  loadRow(v, qkv + qkvAt(g, b, key_valid ? j : 0, 2, h), key_valid, g.dim);
  const int64_t stats = (b * g.heads + h) * g.seq;
  // Queries from the block's first key on (earlier ones see none of its keys).
  for (int64_t i0 = first_key; i0 < g.seq; i0 += kTile) {
    const int64_t rows = g.seq - i0 < kTile ? g.seq - i0 : kTile;
    __syncthreads();
    loadTile(qs, qkv + qkvAt(g, b, 0, 0, h), 3 * g.channels, i0, rows, g.dim);
    loadTile(gs, dout + outAt(g, b, 0, h), g.channels, i0, rows, g.dim);
    const int t = threadIdx.y * blockDim.x + threadIdx.x;
    if (t < kTile) {
      lses[t] = t < rows ? lse[stats + i0 + t] : 0.0f;
      ds_row[t] = t < rows ? d[stats + i0 + t] : 0.0f;
    }
    __syncthreads();
    if (!key_valid) continue;
    for (int ii = 0; ii < rows; ++ii) {
      const int64_t i = i0 + ii;
      if (i < j) continue;
      const float p = expf(warpSum(lanePart(k, qs[ii], g.dim)) * g.scale - lses[ii]);
      const bool keep = keeps(g, rowKeyOf(g, b, h, i), j);
      const float dp = dropped(g, warpSum(lanePart(v, gs[ii], g.dim)), keep);
      addScaled(dv, 1.0f, dropped(g, p, keep), gs[ii], g.dim);
      addScaled(dk, 1.0f, p * (dp - ds_row[ii]) * g.scale, qs[ii], g.dim);
    }
  }
  if (!key_valid) return;
  storeRow(dqkv + qkvAt(g, b, j, 1, h), dk, 1.0f, g.dim);
  storeRow(dqkv + qkvAt(g, b, j, 2, h), dv, 1.0f, g.dim);
}

Geometry geometryOf(const ops::AttentionShape& s, const ops::AttentionDropout& dropout) {
  if (s.head_dim < 1 || s.head_dim > kMaxDim)
    throw Error("causal attention on a GPU takes heads of 1 to " + std::to_string(kMaxDim) +
                " dimensions, not " + std::to_string(s.head_dim));
  Geometry g{};
  g.batch = s.batch;
  g.seq = s.seq;
  g.heads = s.heads;
  g.dim = s.head_dim;
  g.channels = s.heads * s.head_dim;
  g.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  g.seed = dropout.seed;
  g.threshold = dropout.rate > 0.0f ? dropout_mask::dropThreshold(dropout.rate) : 0u;
  g.keep_scale = dropout.rate > 0.0f ? 1.0f / (1.0f - dropout.rate) : 1.0f;
  g.sample_offset = dropout.sample_offset;
  return g;
}

// Calls f(std::integral_constant<int, E>) for the lanes' share of the head.
template <typename F>
void withLaneWidth(int64_t dim, F&& f) {
  switch ((dim + 31) / 32) {
    case 1:
      f(std::integral_constant<int, 1>{});
      return;
    case 2:
      f(std::integral_constant<int, 2>{});
      return;
    case 3:
      f(std::integral_constant<int, 3>{});
      return;
    default:
      f(std::integral_constant<int, 4>{});
      return;
  }
}

dim3 gridOf(const Geometry& g) {
  return dim3(static_cast<unsigned>((g.seq + kWarps - 1) / kWarps), static_cast<unsigned>(g.heads),
              static_cast<unsigned>(g.batch));
}

}  // namespace

void causalAttentionForward(const ops::AttentionShape& s, const void* qkv, void* out, float* lse,
                            const ops::AttentionDropout& dropout, DType dtype, cudaStream_t stream) {
  if (s.batch <= 0 || s.seq <= 0 || s.heads <= 0) return;
  const Geometry g = geometryOf(s, dropout);
  withElementType(dtype, [&](auto element) {
    using T = decltype(element);
    withLaneWidth(g.dim, [&](auto width) {
      forwardKernel<T, decltype(width)::value><<<gridOf(g), dim3(32, kWarps), 0, stream>>>(
          g, static_cast<const T*>(qkv), static_cast<T*>(out), lse);
    });
  });
}

void causalAttentionBackward(const ops::AttentionShape& s, const void* qkv, const void* out, const void* dout,
                             const float* lse, void* dqkv, const ops::AttentionDropout& dropout, DType dtype,
                             cudaStream_t stream) {
  if (s.batch <= 0 || s.seq <= 0 || s.heads <= 0) return;
  const Geometry g = geometryOf(s, dropout);
  StreamScratch scratch(static_cast<size_t>(g.batch * g.heads * g.seq) * sizeof(float), stream,
                        "causalAttentionBackward");
  float* d = scratch.as<float>();
  withElementType(dtype, [&](auto element) {
    using T = decltype(element);
    rowDotKernel<T><<<gridOf(g), dim3(32, kWarps), 0, stream>>>(g, static_cast<const T*>(out),
                                                                static_cast<const T*>(dout), d);
    withLaneWidth(g.dim, [&](auto width) {
      constexpr int E = decltype(width)::value;
      queryGradKernel<T, E><<<gridOf(g), dim3(32, kWarps), 0, stream>>>(
          g, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, d, static_cast<T*>(dqkv));
      keyGradKernel<T, E><<<gridOf(g), dim3(32, kWarps), 0, stream>>>(
          g, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, d, static_cast<T*>(dqkv));
    });
  });
}

}  // namespace dtrain::cuda
