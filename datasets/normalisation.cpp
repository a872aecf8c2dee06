#include "datasets/normalisation.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/errors.h"

namespace dtrain {

namespace {

std::vector<float> perChannel(const char* key, const std::vector<double>& values, int64_t channels,
                              float fallback) {
  if (values.empty()) return std::vector<float>(static_cast<size_t>(channels), fallback);
  if (values.size() == 1)
    return std::vector<float>(static_cast<size_t>(channels), static_cast<float>(values[0]));
  if (static_cast<int64_t>(values.size()) != channels)
    throw ConfigError(std::string("[data] ") + key + " has " + std::to_string(values.size()) +
                      " values but the samples have " + std::to_string(channels) +
                      (channels == 1 ? " channel" : " channels") + "; give one value, or one per channel");
  std::vector<float> out;
  for (double v : values) out.push_back(static_cast<float>(v));
  return out;
}

}  // namespace

Normalisation::Normalisation(std::vector<float> mean, std::vector<float> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  if (mean_.size() != std_.size())
    throw ConfigError("[data] mean has " + std::to_string(mean_.size()) + " values but std has " +
                      std::to_string(std_.size()) + "; give one per channel for both");
  for (float m : mean_)
    if (!std::isfinite(m)) throw ConfigError("[data] mean entries must be finite numbers");
  for (float s : std_)
    if (!(s > 0) || !std::isfinite(s)) throw ConfigError("[data] std entries must be finite and > 0");
}

Normalisation Normalisation::fromConfig(const DataSection& data, int64_t channels) {
  if (data.mean.empty() && data.std.empty()) return Normalisation();
  return Normalisation(perChannel("mean", data.mean, channels, 0.0f),
                       perChannel("std", data.std, channels, 1.0f));
}

void Normalisation::apply(float* sample, int64_t plane) const {
  for (size_t c = 0; c < mean_.size(); ++c) {
    float* p = sample + static_cast<int64_t>(c) * plane;
    const float m = mean_[c], s = std_[c];
    // A true division, as torchvision's Normalize does, so values match it exactly.
    for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) / s;
  }
}

}  // namespace dtrain
