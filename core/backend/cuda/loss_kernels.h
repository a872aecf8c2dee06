// Softmax cross-entropy on the GPU, with the CPU ops::softmaxCrossEntropy's
// meaning and double-precision arithmetic (core/backend/cpu/softmax_cross_entropy.cpp).
// Queued on `stream`, never synchronising; device pointers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain::cuda {

// Over n rows of `classes` logits:
//   *loss_sum += the sum of the per-sample losses (double);
//   *correct  += the number of rows whose first maximal logit is the label;
//   dlogits (may be null) is written with (softmax - q) * grad_scale, q the
//   label-smoothed target (1 - smoothing) * onehot(label) + smoothing / classes;
//   *bad_label = 1 when some label lies outside [0, classes): such a row adds
//   nothing to the loss or the count and gets a zero gradient (the CPU throws
//   instead; the caller reads the flag and reports the error).
// loss_sum, correct and bad_label are device scalars the caller zeroes.
//
// One warp per row, up to 512 rows per block. Each block sums its rows in a
// fixed order and adds to *loss_sum and *correct once, with atomicAdd: for
// n <= 512 (one block) the loss is deterministic; beyond, the order of the
// blocks' additions may vary run to run, which moves the double sum in its
// last bits (about 1e-16 relative). The count is exact either way.
void softmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                         float grad_scale, float* dlogits, double* loss_sum, unsigned long long* correct,
                         int* bad_label, cudaStream_t stream, float smoothing = 0.0f);

// A language model's per-position rows (ops::tokenCrossEntropy's meaning):
// rows of `width` logits of which the first `classes` are the vocabulary
// (the rest take no probability and get a zero gradient); a negative label
// is a padding token (no loss, a zero gradient, not counted); *counted +=
// the rows counted. A label >= classes sets *bad_label as above.
void tokenCrossEntropy(const float* logits, const int32_t* labels, int64_t rows, int64_t width,
                       int64_t classes, float grad_scale, float* dlogits, double* loss_sum,
                       unsigned long long* correct, unsigned long long* counted, int* bad_label,
                       cudaStream_t stream, float smoothing = 0.0f);

}  // namespace dtrain::cuda
