// Global-norm gradient clipping, as PyTorch's clip_grad_norm_ (L2 norm):
//   norm = sqrt(sum over all gradients of g^2)
//   g *= min(1, max_norm / (norm + 1e-6))
// Split in three so the trainer can run the two buffer passes per range on its
// threads: sum each range with sumOfSquares, add the partial sums, compute the
// factor once with clipScale, then scale each range.
//
// Stateless; each function touches only [begin, end), so calls on disjoint
// ranges may run concurrently.
#pragma once
#include <cstdint>

namespace dtrain {

// Sum of g[i]^2 over [begin, end), accumulated in double.
double sumOfSquares(const float* g, int64_t begin, int64_t end);

// The factor to multiply all gradients by: min(1, max_norm / (norm + 1e-6)),
// or 1 when max_norm <= 0 (clipping off). So a norm equal to max_norm is
// still scaled by a hair below 1, exactly as PyTorch does. As in
// PyTorch, a NaN norm gives NaN and an infinite norm 0 (which turns infinite
// gradients into NaN), so non-finite gradients stay visible to the caller.
float clipScale(double total_sum_of_squares, double max_norm);

// g[i] *= s over [begin, end).
void scale(float* g, int64_t begin, int64_t end, float s);

}  // namespace dtrain
