// Softmax cross-entropy, one warp per row: the lanes stride over the row's
// classes and combine with shuffles. The arithmetic is the CPU's (double per
// row, the row maximum subtracted before exponentiation).
#include "core/backend/cuda/loss_kernels.h"

namespace dtrain::cuda {

namespace {

constexpr int kWarpsPerBlock = 16;
constexpr int kRowsPerWarp = 32;
constexpr int64_t kRowsPerBlock = int64_t(kWarpsPerBlock) * kRowsPerWarp;
constexpr unsigned kAllLanes = 0xffffffffu;

// The index the CPU's scan `if (z[c] > z[best]) best = c` (from best = 0)
// ends at, found in parallel: the first index of the largest non-NaN logit,
// or 0 when z[0] is NaN (the scan never leaves a NaN start) or all are NaN.
__device__ long long firstMaxIndex(const float* z, int64_t classes, int lane) {
  float best = 0.0f;
  long long at = -1;  // none yet
  for (int64_t c = lane; c < classes; c += 32) {
    const float v = z[c];
    if (!isnan(v) && (at < 0 || v > best)) {
      best = v;
      at = c;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_down_sync(kAllLanes, best, offset);
    const long long other_at = __shfl_down_sync(kAllLanes, at, offset);
    if (other_at >= 0 && (at < 0 || other > best || (other == best && other_at < at))) {
      best = other;
      at = other_at;
    }
  }
  at = __shfl_sync(kAllLanes, at, 0);
  return at < 0 || isnan(z[0]) ? 0 : at;
}

// The warp's sum of v, the same value in every lane (lane 0's, broadcast).
__device__ double warpSum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kAllLanes, v, offset);
  return __shfl_sync(kAllLanes, v, 0);
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    softmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                              int64_t width, bool padding_labels, float grad_scale, float smoothing,
                              float* dlogits, double* loss_sum, unsigned long long* correct,
                              unsigned long long* counted, int* bad_label) {
  const double spread = static_cast<double>(smoothing) / static_cast<double>(classes);
  const double on_label = 1.0 - static_cast<double>(smoothing);
  __shared__ double warp_loss[kWarpsPerBlock];
  __shared__ unsigned long long warp_hits[kWarpsPerBlock];
  __shared__ unsigned long long warp_rows[kWarpsPerBlock];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double loss = 0.0;  // this warp's rows, in lane 0
  unsigned long long hits = 0, rows = 0;
  for (int k = 0; k < kRowsPerWarp; ++k) {
    // Every branch below depends on the row only, so the warp stays together for the shuffles.
    const int64_t r = blockIdx.x * kRowsPerBlock + int64_t(k) * kWarpsPerBlock + warp;
    if (r >= n) break;
    const float* z = logits + r * width;
    float* d = dlogits ? dlogits + r * width : nullptr;
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      // A padding token (per-position rows) is left out; any other is an error.
      if (lane == 0 && !(padding_labels && label < 0)) *bad_label = 1;
      if (d)
        for (int64_t c = lane; c < width; c += 32) d[c] = 0.0f;
      continue;
    }
    // The padded vocabulary's columns take no probability and no gradient.
    if (d)
      for (int64_t c = classes + lane; c < width; c += 32) d[c] = 0.0f;
    ++rows;
    const long long best = firstMaxIndex(z, classes, lane);
    const double zmax = z[best];
    double partial = 0.0, shifted = 0.0;
    for (int64_t c = lane; c < classes; c += 32) {
      partial += exp(static_cast<double>(z[c]) - zmax);
      shifted += static_cast<double>(z[c]) - zmax;
    }
    const double sum = warpSum(partial);
    const double shifted_sum = smoothing != 0.0f ? warpSum(shifted) : 0.0;
    if (lane == 0) {
      loss += log(sum) - on_label * (static_cast<double>(z[label]) - zmax) - spread * shifted_sum;
      hits += best == label ? 1 : 0;
    }
    if (d) {
      const double inv = 1.0 / sum;
      for (int64_t c = lane; c < classes; c += 32) {
        const double p = exp(static_cast<double>(z[c]) - zmax) * inv;
        d[c] = static_cast<float>((p - spread - (c == label ? on_label : 0.0)) * grad_scale);
      }
    }
  }
  if (lane == 0) {
    warp_loss[warp] = loss;
    warp_hits[warp] = hits;
    warp_rows[warp] = rows;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double block_loss = 0.0;
    unsigned long long block_hits = 0, block_rows = 0;
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      block_loss += warp_loss[w];
      block_hits += warp_hits[w];
      block_rows += warp_rows[w];
    }
    atomicAdd(loss_sum, block_loss);
    if (block_hits) atomicAdd(correct, block_hits);
    if (counted && block_rows) atomicAdd(counted, block_rows);
  }
}

}  // namespace

void softmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                         float grad_scale, float* dlogits, double* loss_sum, unsigned long long* correct,
                         int* bad_label, cudaStream_t stream, float smoothing) {
  if (n <= 0) return;  // (classes <= 0 needs nothing special: every label is then out of range)
  const auto blocks = static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  softmaxCrossEntropyKernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      logits, labels, n, classes, classes, false, grad_scale, smoothing, dlogits, loss_sum, correct, nullptr,
      bad_label);
}

void tokenCrossEntropy(const float* logits, const int32_t* labels, int64_t rows, int64_t width,
                       int64_t classes, float grad_scale, float* dlogits, double* loss_sum,
                       unsigned long long* correct, unsigned long long* counted, int* bad_label,
                       cudaStream_t stream, float smoothing) {
  if (rows <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmaxCrossEntropyKernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      logits, labels, rows, classes, width, true, grad_scale, smoothing, dlogits, loss_sum, correct, counted,
      bad_label);
}

}  // namespace dtrain::cuda
