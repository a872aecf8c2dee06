// Which parameters an optimizer's weight decay applies to: ranges of the flat
// parameter layout (optimizer.h). AdamW decays the matrices (dense and
// convolution kernels) and passes biases, normalisation scales and shifts,
// and embedding tables by ([optimizer] decay_1d, decay_embeddings), as GPT-2's
// and most transformers' recipes do: shrinking a bias or a norm's scale
// towards zero only fights the normalisation.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace dtrain {

class DecayMask {
 public:
  // Everything decays.
  DecayMask() = default;
  // Only the sorted, disjoint [begin, end) `ranges` decay.
  static DecayMask ranges(std::vector<std::pair<int64_t, int64_t>> ranges);
  // From one flag per parameter (non-zero: decays), as a parameter server's
  // shard receives it.
  static DecayMask fromFlags(const float* flags, int64_t n);
  // One flag per parameter of [0, n): 1 decays, 0 does not.
  std::vector<float> flags(int64_t n) const;
  bool all() const { return all_; }

  // Calls piece(b, e, decays) for the pieces of [begin, end), in order.
  template <class Piece>
  void split(int64_t begin, int64_t end, Piece&& piece) const {
    if (all_) {
      if (end > begin) piece(begin, end, true);
      return;
    }
    int64_t at = begin;
    for (const auto& [b, e] : ranges_) {
      if (e <= at) continue;
      if (b >= end) break;
      if (b > at) piece(at, b, false);
      const int64_t stop = e < end ? e : end;
      piece(b > at ? b : at, stop, true);
      at = stop;
    }
    if (at < end) piece(at, end, false);
  }

 private:
  bool all_ = true;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace dtrain
