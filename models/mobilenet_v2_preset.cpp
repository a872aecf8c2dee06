#include "models/mobilenet_v2_preset.h"

#include <algorithm>
#include <string>

#include "models/preset_layers.h"

namespace dtrain {

int64_t roundChannels(double v) {
  constexpr int64_t kDivisor = 8;
  int64_t rounded =
      std::max<int64_t>(kDivisor, static_cast<int64_t>(v + kDivisor / 2.0) / kDivisor * kDivisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += kDivisor;
  return rounded;
}

namespace {

// Convolution (groups = 1, or depthwise) without bias, batch norm and,
// unless `linear`, relu6; returns the last layer's name.
std::string convBnAct(PresetLayers& p, const std::string& name, const std::string& input, int64_t filters,
                      int64_t kernel, int64_t stride, bool depthwise, bool linear) {
  LayerOptions& conv = p.add(name, depthwise ? "depthwise_conv2d" : "conv2d", {input});
  if (!depthwise) p.set(conv, "filters", filters);
  p.set(conv, "kernel", kernel);
  p.set(conv, "stride", stride);
  p.set(conv, "padding", kernel / 2);
  p.set(conv, "bias", false);
  p.add(name + "_bn", "batch_norm");
  if (!linear) p.add(name + "_relu6", "relu6");
  return p.last();
}

}  // namespace

std::vector<LayerSpec> mobilenetV2Layers(const ModelSection& model, int64_t classes) {
  PresetLayers p("mobilenet_v2");
  const double width = model.width;
  // expansion t, channels c, repeats n, first stride s (the paper's Table 2)
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t channels = roundChannels(32 * width);
  std::string x = convBnAct(p, "stem", "input", channels, 3, 2, false, false);
  int block = 0;
  for (const Stage& st : stages) {
    const int64_t out = roundChannels(static_cast<double>(st.c) * width);
    for (int64_t i = 0; i < st.n; ++i) {
      const int64_t stride = i == 0 ? st.s : 1;
      const std::string name = "block" + std::to_string(++block);
      const int64_t hidden = static_cast<int64_t>(static_cast<double>(channels * st.t) + 0.5);
      std::string y = x;
      if (st.t != 1) y = convBnAct(p, name + "_expand", y, hidden, 1, 1, false, false);
      y = convBnAct(p, name + "_depthwise", y, hidden, 3, stride, true, false);
      y = convBnAct(p, name + "_project", y, out, 1, 1, false, true);
      if (stride == 1 && channels == out) {
        p.add(name + "_add", "add", {y, x});
        y = p.last();
      }
      x = y;
      channels = out;
    }
  }
  const int64_t last = roundChannels(1280 * std::max(1.0, width));
  x = convBnAct(p, "head", x, last, 1, 1, false, false);
  p.add("pool", "global_avg_pool", {x});
  if (model.dropout > 0) p.set(p.add("dropout", "dropout"), "rate", model.dropout);
  p.set(p.add("fc", "dense"), "units", classes);
  return p.take();
}

}  // namespace dtrain
