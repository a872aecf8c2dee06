#include "models/gpt_preset.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "models/preset_layers.h"

namespace dtrain {

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's

void dense(PresetLayers& p, const std::string& name, int64_t units, double init_std,
           std::vector<std::string> inputs = {}) {
  LayerOptions& o = p.add(name, "dense", std::move(inputs));
  p.set(o, "units", units);
  p.set(o, "init", std::string("normal"));
  p.set(o, "init_std", init_std);
}

void dropout(PresetLayers& p, const std::string& name, double rate) {
  if (rate > 0) p.set(p.add(name, "dropout"), "rate", rate);
}

}  // namespace

std::vector<LayerSpec> gptLayers(const ModelSection& m, int64_t data_vocab) {
  if (m.vocab > 0 && m.vocab < data_vocab)
    throw ConfigError("[model] vocab = " + std::to_string(m.vocab) +
                      " is smaller than the data's vocabulary of " + std::to_string(data_vocab) +
                      "; use 0 (the data's) or a padded size >= it");
  const int64_t vocab = m.vocab > 0 ? m.vocab : data_vocab;
  PresetLayers p("gpt");
  LayerOptions& wte = p.add("wte", "embedding");
  p.set(wte, "vocab", vocab);
  p.set(wte, "dim", m.dim);
  p.set(p.add("wpe", "position_embedding"), "context", m.context);
  dropout(p, "embedding_dropout", m.dropout);
  // The residual stream's sum grows with depth: its two projections per
  // block start smaller so the stream's variance stays near the embeddings'.
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(m.blocks));
  std::string stream = p.last();
  for (int64_t b = 0; b < m.blocks; ++b) {
    const std::string h = "h" + std::to_string(b) + "_";
    p.add(h + "ln1", "layer_norm", {stream});
    dense(p, h + "qkv", 3 * m.dim, kInitStd);
    p.set(p.add(h + "attention", "causal_self_attention"), "heads", m.heads);
    dense(p, h + "attention_proj", m.dim, residual_std);
    dropout(p, h + "attention_dropout", m.dropout);
    p.add(h + "attention_add", "add", {stream, p.last()});
    stream = p.last();
    p.add(h + "ln2", "layer_norm");
    dense(p, h + "fc1", 4 * m.dim, kInitStd);
    p.add(h + "gelu", "gelu");
    dense(p, h + "fc2", m.dim, residual_std);
    dropout(p, h + "mlp_dropout", m.dropout);
    p.add(h + "mlp_add", "add", {stream, p.last()});
    stream = p.last();
  }
  p.add("ln_f", "layer_norm");
  LayerOptions& head = p.add("lm_head", "dense");
  p.set(head, "units", vocab);
  p.set(head, "bias", false);
  if (m.tie_embeddings) {
    p.set(head, "tie", std::string("wte"));
  } else {
    p.set(head, "init", std::string("normal"));
    p.set(head, "init_std", kInitStd);
  }
  return p.take();
}

}  // namespace dtrain
