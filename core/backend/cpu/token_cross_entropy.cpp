// The per-token loss of a language model. Its rows are as long as the
// vocabulary (50,257 for GPT-2's) and there are batch x T of them, so unlike
// the image loss (softmax_cross_entropy.cpp: short rows, exp in double) the
// exponentials are floats on the branch-free exp the attention uses (within 2
// ulp), summed in 16 float lanes per block of 1024 and the blocks in double:
// vectorised, and within a few parts in 10^6 of the row's sum at worst.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend/attention_ops.h"
#include "core/backend/cpu/float_lanes.h"
#include "core/backend/ops.h"
#include "core/errors.h"

namespace dtrain::ops {

namespace {

using lanes::kBlock;
using lanes::kLanes;
using lanes::rowMax;
using lanes::shiftedSum;

// Sum of exp(z - top) over n values, each exponential written to e when
// given. Blocks of kBlock values are summed in float lanes (64 terms a lane:
// a rounding error of at most 64 float steps of the block's sum), the
// blocks in double.

double expSum(const float* __restrict z, int64_t n, float top, float* __restrict e) {
  double sum = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    float acc[kLanes] = {};
    int64_t c = b;
    if (e) {
      for (; c + kLanes <= end; c += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) acc[l] += (e[c + l] = attentionExp(z[c + l] - top));
      for (; c < end; ++c) acc[0] += (e[c] = attentionExp(z[c] - top));
    } else {
      for (; c + kLanes <= end; c += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) acc[l] += attentionExp(z[c + l] - top);
      for (; c < end; ++c) acc[0] += attentionExp(z[c] - top);
    }
    for (float a : acc) sum += a;
  }
  return sum;
}

}  // namespace

double tokenCrossEntropy(const float* logits, const int32_t* labels, int64_t rows, int64_t width,
                         int64_t classes, float grad_scale, float* dlogits, int64_t* correct,
                         int64_t* counted, float smoothing) {
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] >= classes)
      throw Error("label " + std::to_string(labels[r]) + " of token row " + std::to_string(r) +
                  " is out of range for a vocabulary of " + std::to_string(classes));
  const float spread = smoothing / static_cast<float>(classes);  // q_c off the label
  const float on_label = 1.0f - smoothing;                       // + spread on it
  double total = 0.0;
  int64_t hits = 0, kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * width;
    float* d = dlogits ? dlogits + r * width : nullptr;
    const int32_t label = labels[r];
    if (label < 0) {  // padding: neither loss nor gradient
      if (d) std::fill(d, d + width, 0.0f);
      continue;
    }
    const float top = rowMax(z, classes);
    const double sum = expSum(z, classes, top, d);
    // -sum_c q_c (z_c - top - log sum), with sum_c q_c = 1.
    total += std::log(sum) - on_label * (static_cast<double>(z[label]) - top) -
             (smoothing != 0.0f ? spread * shiftedSum(z, classes, top) : 0.0);
    hits += std::find(z, z + classes, top) - z == label;  // the first maximal logit is the prediction
    ++kept;
    if (d) {
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t c = 0; c < classes; ++c) d[c] = (d[c] * inv - spread) * grad_scale;
      d[label] -= on_label * grad_scale;
      std::fill(d + classes, d + width, 0.0f);
    }
  }
  if (correct) *correct += hits;
  if (counted) *counted += kept;
  return total;
}

}  // namespace dtrain::ops
