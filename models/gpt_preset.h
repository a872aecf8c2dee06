// The `gpt` preset: a GPT-2-style decoder (Radford et al., "Language Models
// are Unsupervised Multitask Learners", 2019), as nanoGPT lays it out. Token
// and learned position embeddings ([model] dim wide, [model] context
// positions), then [model] layers pre-norm blocks, each
//   x + proj(attention(qkv(layer_norm(x))))  then  x + fc2(gelu(fc1(layer_norm(x))))
// with causal self-attention of [model] heads heads and a 4 x dim hidden
// layer, then a final layer_norm and a dense layer to the vocabulary (the
// dataset's: 256 for byte text) predicting each position's next token, its
// weight the token embedding's table unless [model] tie_embeddings = false.
// [model] dropout (0 = none) follows the embeddings, each attention and each
// feed-forward output. GPT-2's initialisation: every weight N(0, 0.02), the
// two projections into the residual stream N(0, 0.02 / sqrt(2 x layers)),
// biases zero, layer norms one and zero.
#pragma once
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

// data_vocab: the dataset's; [model] vocab may pad it.
std::vector<LayerSpec> gptLayers(const ModelSection& model, int64_t data_vocab);

}  // namespace dtrain
