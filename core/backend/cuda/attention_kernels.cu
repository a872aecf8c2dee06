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

template <typename T, int E>
__global__ void forwardKernel(Geometry g, const T* qkv, T* out, float* lse) {
  __shared__ float ks[kTile][kMaxDim];
  __shared__ float vs[kTile][kMaxDim];
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t first_row = blockIdx.x * int64_t(kWarps);
  const int64_t i = first_row + threadIdx.y;
  const int lane = threadIdx.x;
  const bool row_valid = i < g.seq;
  float q[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int64_t c = lane + 32 * e;
    q[e] = row_valid && c < g.dim ? toFloat(qkv[qkvAt(g, b, i, 0, h) + c]) : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -FLT_MAX, l = 0.0f;
  const uint64_t row_key =
      g.threshold ? ops::attentionRowKey(g.seed, g.sample_offset + b, h, row_valid ? i : 0) : 0;
  // The block's last row sees keys up to itself.
  const int64_t keys = first_row + kWarps < g.seq ? first_row + kWarps : g.seq;
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const int64_t rows = keys - j0 < kTile ? keys - j0 : kTile;
    __syncthreads();
    loadTile(ks, qkv + qkvAt(g, b, 0, 1, h), 3 * g.channels, j0, rows, g.dim);
    loadTile(vs, qkv + qkvAt(g, b, 0, 2, h), 3 * g.channels, j0, rows, g.dim);
    __syncthreads();
    if (!row_valid) continue;
    for (int jj = 0; jj < rows && j0 + jj <= i; ++jj) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * e < g.dim) dot += q[e] * ks[jj][lane + 32 * e];
      const float s = warpSum(dot) * g.scale;
      const float m_new = fmaxf(m, s);
      const float correction = expf(m - m_new);
      const float p = expf(s - m_new);
      l = l * correction + p;
      const float kept = g.threshold == 0
                             ? p
                             : (dropout_mask::keep(row_key, j0 + jj, g.threshold) ? p * g.keep_scale : 0.0f);
#pragma unroll
      for (int e = 0; e < E; ++e)
        acc[e] = acc[e] * correction + (lane + 32 * e < g.dim ? kept * vs[jj][lane + 32 * e] : 0.0f);
      m = m_new;
    }
  }
  if (!row_valid) return;
  const float inv = 1.0f / l;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane + 32 * e < g.dim) out[outAt(g, b, i, h) + lane + 32 * e] = fromFloat<T>(acc[e] * inv);
  if (lane == 0) lse[(b * g.heads + h) * g.seq + i] = m + logf(l);
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
  const int lane = threadIdx.x;
  const bool row_valid = i < g.seq;
  float q[E], go[E], dq[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int64_t c = lane + 32 * e;
    const bool in = row_valid && c < g.dim;
    q[e] = in ? toFloat(qkv[qkvAt(g, b, i, 0, h) + c]) : 0.0f;
    go[e] = in ? toFloat(dout[outAt(g, b, i, h) + c]) : 0.0f;
    dq[e] = 0.0f;
  }
  const int64_t stat = (b * g.heads + h) * g.seq + (row_valid ? i : 0);
  const float row_lse = lse[stat], row_d = d[stat];
  const uint64_t row_key =
      g.threshold ? ops::attentionRowKey(g.seed, g.sample_offset + b, h, row_valid ? i : 0) : 0;
  const int64_t keys = first_row + kWarps < g.seq ? first_row + kWarps : g.seq;
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const int64_t rows = keys - j0 < kTile ? keys - j0 : kTile;
    __syncthreads();
    loadTile(ks, qkv + qkvAt(g, b, 0, 1, h), 3 * g.channels, j0, rows, g.dim);
    loadTile(vs, qkv + qkvAt(g, b, 0, 2, h), 3 * g.channels, j0, rows, g.dim);
    __syncthreads();
    if (!row_valid) continue;
    for (int jj = 0; jj < rows && j0 + jj <= i; ++jj) {
      float qk = 0.0f, gv = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * e < g.dim) {
          qk += q[e] * ks[jj][lane + 32 * e];
          gv += go[e] * vs[jj][lane + 32 * e];
        }
      const float p = expf(warpSum(qk) * g.scale - row_lse);
      float dp = warpSum(gv);
      if (g.threshold) dp = dropout_mask::keep(row_key, j0 + jj, g.threshold) ? dp * g.keep_scale : 0.0f;
      const float ds = p * (dp - row_d) * g.scale;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * e < g.dim) dq[e] += ds * ks[jj][lane + 32 * e];
    }
  }
  if (!row_valid) return;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane + 32 * e < g.dim) dqkv[qkvAt(g, b, i, 0, h) + lane + 32 * e] = fromFloat<T>(dq[e]);
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
  const int lane = threadIdx.x;
  const bool key_valid = j < g.seq;
  float k[E], v[E], dk[E], dv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int64_t c = lane + 32 * e;
    const bool in = key_valid && c < g.dim;
    k[e] = in ? toFloat(qkv[qkvAt(g, b, j, 1, h) + c]) : 0.0f;
    v[e] = in ? toFloat(qkv[qkvAt(g, b, j, 2, h) + c]) : 0.0f;
    dk[e] = dv[e] = 0.0f;
  }
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
      float qk = 0.0f, gv = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * e < g.dim) {
          qk += qs[ii][lane + 32 * e] * k[e];
          gv += gs[ii][lane + 32 * e] * v[e];
        }
      const float p = expf(warpSum(qk) * g.scale - lses[ii]);
      float dp = warpSum(gv);
      float kept = p;
      if (g.threshold) {
        const bool keep =
            dropout_mask::keep(ops::attentionRowKey(g.seed, g.sample_offset + b, h, i), j, g.threshold);
        kept = keep ? p * g.keep_scale : 0.0f;
        dp = keep ? dp * g.keep_scale : 0.0f;
      }
      const float ds = p * (dp - ds_row[ii]) * g.scale;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * e < g.dim) {
          dv[e] += kept * gs[ii][lane + 32 * e];
          dk[e] += ds * qs[ii][lane + 32 * e];
        }
    }
  }
  if (!key_valid) return;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane + 32 * e < g.dim) {
      dqkv[qkvAt(g, b, j, 1, h) + lane + 32 * e] = fromFloat<T>(dk[e]);
      dqkv[qkvAt(g, b, j, 2, h) + lane + 32 * e] = fromFloat<T>(dv[e]);
    }
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
