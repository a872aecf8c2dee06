// Normalisation: (x - mean[c]) / std[c] on every pixel of channel c of a
// sample, after augmentation (so padding is black before it, as in
// torchvision's Pad-then-Normalize). The loader applies it to the training
// and evaluation batches of every dataset alike.
// Ownership: a small value. Thread-safety: immutable; apply() is safe from
// any thread.
#pragma once
#include <cstdint>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

class Normalisation {
 public:
  Normalisation() = default;  // none: active() is false
  // One mean and one std per channel (equal lengths). Throws ConfigError
  // for a std that is not > 0 or a value that is not finite.
  Normalisation(std::vector<float> mean, std::vector<float> std);
  // [data] mean / std for samples of `channels` channels: each empty (mean
  // 0, std 1), one value for every channel, or one per channel. Throws
  // ConfigError naming the key when a length does not fit the channels.
  static Normalisation fromConfig(const DataSection& data, int64_t channels);

  bool active() const { return !mean_.empty(); }
  // Channels it is for (0 when inactive).
  int64_t channels() const { return static_cast<int64_t>(mean_.size()); }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& std() const { return std_; }

  // In place on `channels()` planes of `plane` floats; nothing when inactive.
  void apply(float* sample, int64_t plane) const;

 private:
  std::vector<float> mean_, std_;
};

}  // namespace dtrain
