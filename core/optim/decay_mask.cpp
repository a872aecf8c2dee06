#include "core/optim/decay_mask.h"

#include "core/errors.h"

namespace dtrain {

DecayMask DecayMask::ranges(std::vector<std::pair<int64_t, int64_t>> ranges) {
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].first > ranges[i].second || (i > 0 && ranges[i].first < ranges[i - 1].second))
      throw Error("DecayMask: ranges must be sorted and disjoint");
  DecayMask mask;
  mask.all_ = false;
  mask.ranges_ = std::move(ranges);
  return mask;
}

DecayMask DecayMask::fromFlags(const float* flags, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t i = 0; i < n;) {
    if (flags[i] == 0.0f) {
      ++i;
      continue;
    }
    int64_t e = i;
    while (e < n && flags[e] != 0.0f) ++e;
    ranges.emplace_back(i, e);
    i = e;
  }
  if (static_cast<int64_t>(ranges.size()) == 1 && ranges[0].first == 0 && ranges[0].second == n)
    return DecayMask();
  return DecayMask::ranges(std::move(ranges));
}

std::vector<float> DecayMask::flags(int64_t n) const {
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  split(0, n, [&](int64_t b, int64_t e, bool decays) {
    if (decays)
      for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = 1.0f;
  });
  return out;
}

}  // namespace dtrain
