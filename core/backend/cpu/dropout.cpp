// Inverted dropout with a stateless, counter-based mask (core/backend/dropout_mask.h,
// shared with the CUDA kernels). Being a pure function of the global sample
// index, the mask does not depend on thread or rank splits, and backward
// recomputes it.
#include <cstring>

#include "core/backend/dropout_mask.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

namespace {

// out[e] = keep(e) ? in[e] * scale : 0 for one row.
void applyRow(const float* __restrict in, float* __restrict out, int64_t cols, uint64_t row_key,
              uint32_t threshold, float scale) {
  for (int64_t e = 0; e < cols; ++e)
    out[e] = dropout_mask::keptOrZero(in[e] * scale, dropout_mask::keep(row_key, e, threshold));
}

void apply(const float* in, float* out, int64_t rows, int64_t cols, float rate, const DropoutKey& key) {
  const uint32_t threshold = dropout_mask::dropThreshold(rate);
  const float scale = dropout_mask::keptScale(rate);
  const uint64_t layer_key = dropout_mask::layerKey(key.seed, key.layer);
  for (int64_t r = 0; r < rows; ++r)
    applyRow(in + r * cols, out + r * cols, cols, dropout_mask::rowKey(layer_key, key.first_sample + r),
             threshold, scale);
}

}  // namespace

void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate, const DropoutKey& key) {
  apply(x, y, rows, cols, rate, key);
}

void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const DropoutKey& key) {
  apply(dy, dx, rows, cols, rate, key);
}

}  // namespace dtrain::ops
