#include "core/nn/layers/layer_util.h"

#include "core/errors.h"

namespace dtrain::layer_util {

std::string label(const Layer& layer) { return "layer '" + layer.name() + "' (" + layer.type() + ")"; }

const Shape& singleInput(const Layer& layer, const std::vector<Shape>& inputs) {
  if (inputs.size() != 1)
    throw ShapeError(label(layer) + " takes 1 input, got " + std::to_string(inputs.size()));
  return inputs[0];
}

std::string pairText(int64_t a, int64_t b, bool compact) {
  if (compact && a == b) return std::to_string(a);
  return std::to_string(a) + "x" + std::to_string(b);
}

InitKind readInit(const LayerOptions& options, const LayerDefaults& defaults, bool allow_normal) {
  const std::string fallback = defaults.weight_init == InitKind::GlorotUniform ? "glorot" : "he";
  const std::string init = options.getString("init", fallback);
  if (init == "he") return InitKind::HeNormal;
  if (init == "glorot") return InitKind::GlorotUniform;
  if (init == "normal" && allow_normal) return InitKind::Normal;
  options.fail("init", std::string("init must be \"he\"") +
                           (allow_normal ? ", \"glorot\" or \"normal\"" : " or \"glorot\"") + " (got \"" +
                           init + "\")");
}

double readInitStd(const LayerOptions& options, double fallback) {
  const double std = options.getFloat("init_std", fallback);
  if (!(std >= 0.0)) options.fail("init_std", "init_std must be >= 0 (got " + std::to_string(std) + ")");
  return std;
}

std::pair<int64_t, int64_t> readPositivePair(const LayerOptions& options, const std::string& key,
                                             std::pair<int64_t, int64_t> fallback, bool allow_zero) {
  auto v = options.getPair(key, fallback);
  const int64_t bad = allow_zero ? (v.first < 0 ? v.first : v.second) : (v.first <= 0 ? v.first : v.second);
  if (allow_zero ? (v.first < 0 || v.second < 0) : (v.first <= 0 || v.second <= 0))
    options.fail(
        key, key + (allow_zero ? " must be >= 0" : " must be > 0") + " (got " + std::to_string(bad) + ")");
  return v;
}

}  // namespace dtrain::layer_util
