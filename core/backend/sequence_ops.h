// The element-wise and per-token passes of sequence models (GPT-style
// transformers, core/nn/layers/): layer normalisation, the tanh-approximated
// GELU, token and position embeddings. Raw pointers and extents, row-major;
// "writes" overwrites its output, "accumulates" adds into it, as in ops.h.
// Thread-safe: no state.
#pragma once
#include <cstdint>

namespace dtrain::ops {

// ------------------------------------------------------- layer normalisation --

// For each of `rows` rows of `cols` values: mean and 1/sqrt(variance + eps)
// (population variance, as PyTorch's LayerNorm), then
// y = (x - mean) * rstd * gamma + beta. Writes y, mean[rows] and rstd[rows]
// (backward reuses them). The statistics are two-pass: a provisional mean,
// then the deviations from it (so a row with a large mean keeps its
// variance), summed on float lanes and the lanes in double; rstd is within
// about (cols / 16 + 3) / 2 float roundings (cpu/sequence_ops.cpp).
void layerNormForward(const float* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                      float eps, float* y, float* mean, float* rstd);
// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))   (written, may be null)
//   dgamma += sum over rows of dy * xhat, dbeta += sum over rows of dy (accumulated).
void layerNormBackward(const float* x, const float* dy, int64_t rows, int64_t cols, const float* gamma,
                       const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta);

// -------------------------------------------------------------------- gelu --

// GPT-2's GELU: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Writes y.
// Computed as x sigmoid(2u) without libm; within 6 |y| + 1.51 units of 2^-24
// of the exact value (cpu/sequence_ops.cpp derives the bounds). NaN gives NaN.
void geluForward(const float* x, float* y, int64_t n);
// dx = dy * gelu'(x), gelu' within 9 |gelu'| + 6.3 units of 2^-24. Writes dx
// (may alias dy).
void geluBackward(const float* x, const float* dy, float* dx, int64_t n);

// --------------------------------------------------------------- embedding --

// y[t] = table[ids[t]] for `tokens` ids, rows of `dim`. The ids are floats
// holding whole numbers (a model's input is floats; exact below 2^24) and must
// lie in [0, rows): returns the position of the first that does not, or -1
// when all do (then y is written).
int64_t embeddingForward(const float* ids, int64_t tokens, const float* table, int64_t rows, int64_t dim,
                         float* y);
// dtable[ids[t]] += dy[t] for every token (ids already checked by forward).
void embeddingBackward(const float* ids, int64_t tokens, const float* dy, int64_t dim, float* dtable);

}  // namespace dtrain::ops
