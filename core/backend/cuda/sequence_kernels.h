// The CUDA versions of the sequence layers' passes (core/backend/sequence_ops.h
// and the embedding layers): GELU, layer normalisation, token and position
// embeddings. Activations are of `dtype` (float, or a 16-bit precision's, each
// value loaded as a float and every result stored rounded once); parameters,
// their gradients and the normalisation's statistics are float.
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory. The sums over rows (the
// normalisation's parameter gradients, a position table's gradient) and the
// token table's gradient are deterministic: fixed slices summed in a fixed
// order, and the tokens of one id added in the order of their positions
// (sorted by id with a stable radix sort), never by atomics. Scratch memory
// comes from the stream-ordered allocator; DeviceError when it cannot.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's GELU; x may equal y.
void geluForward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream);
// dx = dy * gelu'(x); dx may equal dy.
void geluBackward(const void* x, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream);

// Each row of x [rows, cols] normalised: y = (x - mean) * rstd * gamma + beta,
// rstd = 1 / sqrt(var + eps) (var over the row, divided by cols); writes
// mean and rstd [rows] for backward.
void layerNormForward(const void* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                      float eps, void* y, float* mean, float* rstd, DType dtype, cudaStream_t stream);
// With xhat = (x - mean) rstd and g = dy gamma: dx = rstd (g - mean(g) - xhat
// mean(g xhat)) written (dx may be null); dgamma += sum over rows of dy xhat,
// dbeta += sum over rows of dy.
void layerNormBackward(const void* x, const void* dy, int64_t rows, int64_t cols, const float* gamma,
                       const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta,
                       DType dtype, cudaStream_t stream);

// out[t] = table[ids[t]] for `tokens` ids held as whole floats, rows of `dim`
// (table and out of `dtype`: a 16-bit run binds the table as a 16-bit copy);
// ids must lie in [0, vocab) (the loader checks them against the vocabulary).
void embeddingForward(const float* ids, int64_t tokens, const void* table, int64_t dim, void* out,
                      DType dtype, cudaStream_t stream);
// dtable[ids[t]] += dout[t], each id's tokens added in position order.
void embeddingBackward(const float* ids, int64_t tokens, const void* dout, int64_t dim, int64_t vocab,
                       float* dtable, DType dtype, cudaStream_t stream);

// y[s, i] = x[s, i] + table[i] for n samples of `per_sample` values (a
// sample's positions' rows, from the table's first row on); x may equal y.
void positionEmbeddingForward(const void* x, const float* table, int64_t n, int64_t per_sample, void* y,
                              DType dtype, cudaStream_t stream);

}  // namespace dtrain::cuda
