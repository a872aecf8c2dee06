#include "core/train/weight_decay_mask.h"

namespace dtrain {

DecayMask weightDecayMask(const ParamStore& store, const OptimizerSection& cfg) {
  if (cfg.type != "adamw" || (cfg.decay_1d && cfg.decay_embeddings)) return DecayMask();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const ParamEntry& e : store.entries()) {
    const bool decays = e.spec.embedding_table ? cfg.decay_embeddings : e.shape.rank() >= 2 || cfg.decay_1d;
    if (!decays) continue;
    // The padding after a tensor is zero and stays so: neighbours merge.
    const int64_t end = e.offset + ParamStore::paddedSize(e.shape.numel());
    if (!ranges.empty() && ranges.back().second == e.offset)
      ranges.back().second = end;
    else
      ranges.emplace_back(e.offset, end);
  }
  if (ranges.size() == 1 && ranges[0].first == 0 && ranges[0].second == store.size()) return DecayMask();
  return DecayMask::ranges(std::move(ranges));
}

}  // namespace dtrain
