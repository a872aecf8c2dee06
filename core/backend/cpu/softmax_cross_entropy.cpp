// Softmax cross-entropy: the loss and its gradient in one pass over the logits.
// Rows are short (the class count), so this is computed in double per row for
// an accurate loss; the cost is negligible next to the layers.
#include <cmath>
#include <string>

#include "core/backend/ops.h"
#include "core/errors.h"

namespace dtrain::ops {

namespace {

// One row's loss against target q = (1 - smoothing) onehot(label) + smoothing /
// classes; writes the gradient row when d is given. Returns the loss; *hit
// when the first maximal logit is the label.
double rowLoss(const float* z, int32_t label, int64_t classes, float grad_scale, float* d, float smoothing,
               bool* hit) {
  const double spread = static_cast<double>(smoothing) / static_cast<double>(classes);  // q_c off the label
  const double on_label = 1.0 - static_cast<double>(smoothing);                         // + spread on it
  int64_t best = 0;
  for (int64_t c = 1; c < classes; ++c)
    if (z[c] > z[best]) best = c;
  const double zmax = z[best];
  double sum = 0.0;
  double shifted_sum = 0.0;  // sum_c (z_c - zmax), for the smoothed part of the target
  for (int64_t c = 0; c < classes; ++c) {
    sum += std::exp(static_cast<double>(z[c]) - zmax);
    shifted_sum += static_cast<double>(z[c]) - zmax;
  }
  *hit = best == label;
  if (d) {
    const double inv = 1.0 / sum;
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(z[c]) - zmax) * inv;
      d[c] = static_cast<float>((p - spread - (c == label ? on_label : 0.0)) * grad_scale);
    }
  }
  // -sum_c q_c (z_c - zmax - log sum), with sum_c q_c = 1.
  return std::log(sum) - on_label * (static_cast<double>(z[label]) - zmax) -
         (smoothing != 0.0f ? spread * shifted_sum : 0.0);
}

}  // namespace

double softmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                           float grad_scale, float* dlogits, int64_t* correct, float smoothing) {
  // Validate every label first so a bad batch leaves no partial results.
  for (int64_t r = 0; r < n; ++r)
    if (labels[r] < 0 || labels[r] >= classes)
      throw Error("label " + std::to_string(labels[r]) + " of sample " + std::to_string(r) +
                  " is out of range for " + std::to_string(classes) + " classes (expected 0.." +
                  std::to_string(classes - 1) + ")");
  double total = 0.0;
  int64_t hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    bool hit = false;
    total += rowLoss(logits + r * classes, labels[r], classes, grad_scale,
                     dlogits ? dlogits + r * classes : nullptr, smoothing, &hit);
    hits += hit;
  }
  if (correct) *correct += hits;
  return total;
}

}  // namespace dtrain::ops
