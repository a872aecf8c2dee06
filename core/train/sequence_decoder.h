// Generation from a trained language model (a model whose output [T, vocab]
// predicts each position's next token, such as the gpt preset): sampling one
// token after another.
//
// With the cache, the decoder runs a copy of the model built for one-token
// sequences (LayerContext::decode_position): every layer but attention works
// token by token anyway, and attention keeps the earlier positions' keys and
// values, so N tokens cost N one-token steps. Without it, every step runs the
// whole model on the sequence so far (N steps of up to `context` tokens):
// slower, the reference the cached path must equal. When a sequence reaches
// the context, the uncached path keeps its last `context` tokens each step;
// the cached one restarts its cache from the last context/2 tokens (so past
// the context the two differ, by design).
//
// Sampling: logits / temperature, softmax over the top_k largest (0 = all),
// one draw from a seeded stream; temperature 0 takes the largest (greedy).
//
// Ownership: the decoder owns its models; they read the trained parameters
// given to it, which must outlive it.
// Thread-safety: one thread at a time.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"

namespace dtrain {

struct SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
};

class SequenceDecoder {
 public:
  // `trained`: parameters in the layout of `model` (a checkpoint's); vocab:
  // the output width; context: the longest sequence the model reads.
  SequenceDecoder(const ModelSection& model, int64_t vocab, int64_t context, const ParamStore& trained,
                  const ParamStore& buffers);
  ~SequenceDecoder();

  // The prompt (ids in [0, vocab), at least one) followed by `tokens` sampled ids.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t tokens,
                                const SamplingOptions& sampling, bool use_cache);

 private:
  struct Built;
  Built& modelFor(int64_t length);
  // The next token's logits after feeding `token` at `position` (cached path).
  const float* step(int32_t token, int64_t position);

  ModelSection model_;
  int64_t vocab_, context_;
  int64_t width_ = 0;  // the output rows' width: vocab_, or a padded vocabulary
  const ParamStore& trained_;
  const ParamStore& buffers_;
  std::map<int64_t, std::unique_ptr<Built>> built_;  // by sequence length
  Tensor grads_;  // the models' gradient buffer, which inference never writes
};

// Samples one id from `logits` [vocab] with `options` and the stream `draw`
// (a uniform in [0, 1)).
int32_t sampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, double draw);

}  // namespace dtrain
