// The GPT model's layers on a GPU: the CPU layers' configuration, shapes and
// parameters (core/nn/layers/{gelu,layer_norm,embedding,position_embedding,
// causal_self_attention}.h), their passes computed by the backend's kernels
// (core/backend/cuda/sequence_kernels.h, attention_kernels.h) on the device's
// compute stream, on activations of any dtype. Decoding one token at a time
// (LayerContext::decode_position, `dtrain generate`) runs on the CPU.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/causal_self_attention.h"
#include "core/nn/layers/embedding.h"
#include "core/nn/layers/gelu.h"
#include "core/nn/layers/layer_norm.h"
#include "core/nn/layers/position_embedding.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaGelu : public Gelu {
 public:
  CudaGelu(const Gelu& cpu, CudaContext& ctx) : Gelu(cpu.name()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

class CudaLayerNorm : public LayerNorm {
 public:
  CudaLayerNorm(const LayerNorm& cpu, CudaContext& ctx) : LayerNorm(cpu.name(), cpu.eps()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  Scratch stats_;  // device memory: each row's mean, then its 1/std
};

class CudaEmbedding : public Embedding {
 public:
  CudaEmbedding(const Embedding& cpu, CudaContext& ctx) : Embedding(cpu.name(), cpu.config()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

class CudaPositionEmbedding : public PositionEmbedding {
 public:
  CudaPositionEmbedding(const PositionEmbedding& cpu, CudaContext& ctx)
      : PositionEmbedding(cpu.name(), cpu.config()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

class CudaCausalSelfAttention : public CausalSelfAttention {
 public:
  CudaCausalSelfAttention(const CausalSelfAttention& cpu, CudaContext& ctx)
      : CausalSelfAttention(cpu.name(), cpu.config()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  Scratch lse_;  // device memory: [batch, heads, seq] of the last forward
};

}  // namespace dtrain
