#include "models/resnet_preset.h"

#include <string>

#include "core/errors.h"
#include "models/preset_layers.h"

namespace dtrain {

namespace {

// conv2d without bias, then batch norm; returns the batch norm's name.
std::string convBn(PresetLayers& p, const std::string& name, const std::string& input, int64_t filters,
                   int64_t kernel, int64_t stride) {
  LayerOptions& conv = p.add(name + "_conv", "conv2d", {input});
  p.set(conv, "filters", filters);
  p.set(conv, "kernel", kernel);
  p.set(conv, "stride", stride);
  p.set(conv, "padding", kernel / 2);
  p.set(conv, "bias", false);
  p.add(name + "_bn", "batch_norm");
  return p.last();
}

// A basic block: two 3x3 conv-bn, the second's sum with the shortcut, relu.
std::string basicBlock(PresetLayers& p, const std::string& name, const std::string& input, int64_t in_filters,
                       int64_t filters, int64_t stride) {
  convBn(p, name + "_a", input, filters, 3, stride);
  p.add(name + "_a_relu", "relu");
  const std::string body = convBn(p, name + "_b", p.last(), filters, 3, 1);
  std::string shortcut = input;
  if (stride != 1 || in_filters != filters) shortcut = convBn(p, name + "_proj", input, filters, 1, stride);
  p.add(name + "_add", "add", {body, shortcut});
  p.add(name + "_relu", "relu");
  return p.last();
}

// A bottleneck block (torchvision's ResNet-50 and deeper, v1.5: the stride
// on the 3x3): 1x1 down to `width`, 3x3, 1x1 up to 4 x width, the sum with
// the shortcut, relu.
std::string bottleneckBlock(PresetLayers& p, const std::string& name, const std::string& input,
                            int64_t in_filters, int64_t width, int64_t stride) {
  convBn(p, name + "_a", input, width, 1, 1);
  p.add(name + "_a_relu", "relu");
  convBn(p, name + "_b", p.last(), width, 3, stride);
  p.add(name + "_b_relu", "relu");
  const std::string body = convBn(p, name + "_c", p.last(), 4 * width, 1, 1);
  std::string shortcut = input;
  if (stride != 1 || in_filters != 4 * width) shortcut = convBn(p, name + "_proj", input, 4 * width, 1, stride);
  p.add(name + "_add", "add", {body, shortcut});
  p.add(name + "_relu", "relu");
  return p.last();
}

// ImageNet-style depths: blocks per stage, and whether they are bottlenecks.
struct ImageNetDepth {
  int64_t depth;
  int blocks[4];
  bool bottleneck;
};
constexpr ImageNetDepth kImageNetDepths[] = {{18, {2, 2, 2, 2}, false},
                                             {34, {3, 4, 6, 3}, false},
                                             {50, {3, 4, 6, 3}, true},
                                             {101, {3, 4, 23, 3}, true},
                                             {152, {3, 8, 36, 3}, true}};

std::string head(PresetLayers& p, const std::string& input, int64_t classes) {
  p.add("pool", "global_avg_pool", {input});
  p.set(p.add("fc", "dense"), "units", classes);
  return p.last();
}

}  // namespace

std::vector<LayerSpec> resnetLayers(const ModelSection& model, int64_t classes) {
  PresetLayers p("resnet");
  const int64_t depth = model.depth;
  for (const ImageNetDepth& d : kImageNetDepths) {
    if (d.depth != depth) continue;
    std::string x = convBn(p, "stem", "input", 64, 7, 2);
    p.add("stem_relu", "relu");
    LayerOptions& pool = p.add("stem_pool", "max_pool");
    p.set(pool, "kernel", int64_t{3});
    p.set(pool, "stride", int64_t{2});
    p.set(pool, "padding", int64_t{1});
    x = p.last();
    int64_t in_filters = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int s = 0; s < 4; ++s)
      for (int b = 0; b < d.blocks[s]; ++b) {
        const std::string name = "stage" + std::to_string(s + 1) + "_block" + std::to_string(b + 1);
        const int64_t stride = s > 0 && b == 0 ? 2 : 1;
        x = d.bottleneck ? bottleneckBlock(p, name, x, in_filters, widths[s], stride)
                         : basicBlock(p, name, x, in_filters, widths[s], stride);
        in_filters = d.bottleneck ? 4 * widths[s] : widths[s];
      }
    head(p, x, classes);
    return p.take();
  }
  if (depth < 8 || (depth - 2) % 6 != 0)
    throw ConfigError("[model] depth " + std::to_string(depth) +
                      " is not a ResNet depth; use 18, 34, 50, 101 or 152, or 6n+2 such as 20, 32 or 56");
  const int64_t blocks = (depth - 2) / 6;
  std::string x = convBn(p, "stem", "input", 16, 3, 1);
  p.add("stem_relu", "relu");
  x = p.last();
  int64_t in_filters = 16;
  const int64_t widths[3] = {16, 32, 64};
  for (int s = 0; s < 3; ++s)
    for (int64_t b = 0; b < blocks; ++b) {
      const std::string name = "stage" + std::to_string(s + 1) + "_block" + std::to_string(b + 1);
      x = basicBlock(p, name, x, in_filters, widths[s], s > 0 && b == 0 ? 2 : 1);
      in_filters = widths[s];
    }
  head(p, x, classes);
  return p.take();
}

}  // namespace dtrain
