#include "core/train/sequence_decoder.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/util/rng.h"
#include "models/model_builder.h"

namespace dtrain {

// A model for sequences of one length, bound to the trained parameters
// themselves (their layout does not depend on the length; Model::bind checks
// it entry by entry).
struct SequenceDecoder::Built {
  std::unique_ptr<Model> model;
  Tensor input;
};

SequenceDecoder::SequenceDecoder(const ModelSection& model, int64_t vocab, int64_t context,
                                 const ParamStore& trained, const ParamStore& buffers)
    : model_(model),
      vocab_(vocab),
      context_(context),
      trained_(trained),
      buffers_(buffers),
      grads_(trained.gradBuffer()) {  // inference writes none: one buffer serves every length's model
  if (context_ < 1) throw ConfigError("generation needs a context of at least one token");
}

SequenceDecoder::~SequenceDecoder() = default;

SequenceDecoder::Built& SequenceDecoder::modelFor(int64_t length) {
  auto it = built_.find(length);
  if (it != built_.end()) return *it->second;
  auto b = std::make_unique<Built>();
  b->model = buildModel(model_, Shape{length}, vocab_, builtinLayers());
  const Shape& out = b->model->outputShape();
  if (out.rank() != 2 || out[0] != length || out[1] < vocab_)
    throw ConfigError(
        "generation needs a model predicting every position's next token ([T, vocab] out), not " + out.str());
  width_ = out[1];
  b->model->bind(trained_, grads_, 1, &buffers_);
  b->input = Tensor::empty(Shape{1, length});
  return *built_.emplace(length, std::move(b)).first->second;
}

const float* SequenceDecoder::step(int32_t token, int64_t position) {
  Built& b = modelFor(1);
  b.input.data()[0] = static_cast<float>(token);
  LayerContext ctx;
  ctx.training = false;
  ctx.decode_position = position;
  return b.model->forward(b.input, ctx).data();
}

std::vector<int32_t> SequenceDecoder::generate(const std::vector<int32_t>& prompt, int64_t tokens,
                                               const SamplingOptions& sampling, bool use_cache) {
  if (prompt.empty()) throw ConfigError("generation needs a prompt of at least one token");
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab_)
      throw ConfigError("the prompt's token " + std::to_string(id) + " is not an id in [0, " +
                        std::to_string(vocab_) + ")");
  std::vector<int32_t> seq = prompt;
  Rng rng(Rng::mix(sampling.seed, 0x67656E));  // "gen"
  // Cached: the positions fed so far; a full context restarts from its last half.
  int64_t fed = 0, start = 0;
  for (int64_t k = 0; k < tokens; ++k) {
    const float* logits;
    if (use_cache) {
      if (static_cast<int64_t>(seq.size()) - start > context_) {
        start = static_cast<int64_t>(seq.size()) - std::max<int64_t>(context_ / 2, 1);
        fed = 0;
      }
      const float* last = nullptr;
      for (; start + fed < static_cast<int64_t>(seq.size()); ++fed) last = step(seq[start + fed], fed);
      logits = last;
    } else {
      const int64_t length = std::min<int64_t>(static_cast<int64_t>(seq.size()), context_);
      Built& b = modelFor(length);
      for (int64_t i = 0; i < length; ++i)
        b.input.data()[i] = static_cast<float>(seq[seq.size() - length + i]);
      LayerContext ctx;
      ctx.training = false;
      logits = b.model->forward(b.input, ctx).data() + (length - 1) * width_;
    }
    seq.push_back(sampleToken(logits, vocab_, sampling, rng.uniformDouble()));
  }
  return seq;
}

int32_t sampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, double draw) {
  if (options.temperature <= 0.0)
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int64_t keep = options.top_k > 0 ? std::min(options.top_k, vocab) : vocab;
  // Largest first; equal logits by id, so the draw alone decides.
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> weight(static_cast<size_t>(keep));
  double total = 0.0;
  const double top = logits[order[0]];
  for (int64_t i = 0; i < keep; ++i)
    total += weight[static_cast<size_t>(i)] =
        std::exp((logits[order[static_cast<size_t>(i)]] - top) / options.temperature);
  double target = draw * total;
  for (int64_t i = 0; i < keep; ++i) {
    target -= weight[static_cast<size_t>(i)];
    if (target < 0.0) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(keep - 1)];
}

}  // namespace dtrain
