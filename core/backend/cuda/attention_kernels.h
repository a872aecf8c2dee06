// Causal multi-head self-attention on a GPU, FlashAttention-2's way: each
// query row's scores are formed a tile of keys at a time in shared memory
// with a running maximum and sum (online softmax), so no seq x seq matrix is
// ever stored; the forward keeps each row's log-sum-exp, and backward
// recomputes the probabilities from it (one pass over query rows for dq, one
// over key rows for dk and dv: deterministic, no atomics). The layouts,
// scale (1/sqrt(head_dim)) and dropout mask are the CPU's
// (core/backend/attention_ops.h), so a GPU computes what the CPU does within
// float rounding. Activations of `dtype` (each value loaded as a float, the
// arithmetic in float, results stored rounded once); lse and the row sums
// are float.
//
// A warp computes one row, its lanes splitting the head's dimensions (up to
// 128: four per lane), with the dot products reduced across the warp. That
// is the plain form of the algorithm, written for correctness on every
// GPU; tensor-core tiles are the faster form to come.
//
// Every function queues its work on `stream` and returns; pointers are device
// memory. Throws Error for a head size above 128.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/attention_ops.h"
#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// qkv [batch, seq, 3C], out [batch, seq, C] of `dtype`; lse [batch, heads, seq].
void causalAttentionForward(const ops::AttentionShape& s, const void* qkv, void* out, float* lse,
                            const ops::AttentionDropout& dropout, DType dtype, cudaStream_t stream);
// dqkv [batch, seq, 3C] written whole, from dout [batch, seq, C], the
// forward's out and lse, and the same dropout.
void causalAttentionBackward(const ops::AttentionShape& s, const void* qkv, const void* out, const void* dout,
                             const float* lse, void* dqkv, const ops::AttentionDropout& dropout, DType dtype,
                             cudaStream_t stream);

}  // namespace dtrain::cuda
