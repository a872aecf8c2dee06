// The resnet and mobilenet_v2 presets: parameter counts equal the published
// architectures' (torchvision's counts, which include batch norm's scale and
// shift but not its running statistics), shapes flow to one value per class,
// and the layer list is the architecture (counted by type).
#include <doctest/doctest.h>

#include <map>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/param_store.h"
#include "models/mobilenet_v2_preset.h"
#include "models/model_builder.h"

using namespace dtrain;

namespace {

struct Built {
  int64_t params = 0;
  int64_t buffers = 0;
  std::map<std::string, int> types;  // layer type -> count
  Shape output;
};

Built build(const ModelSection& m, const Shape& input, int64_t classes) {
  auto model = buildModel(m, input, classes, builtinLayers());
  ParamStore params, buffers;
  model->registerParams(params);
  model->registerBuffers(buffers);
  Built b;
  b.params = params.count();
  b.buffers = buffers.count();
  for (const auto& node : model->nodes()) ++b.types[node.layer->type()];
  b.output = model->outputShape();
  return b;
}

ModelSection resnet(int64_t depth) {
  ModelSection m;
  m.preset = "resnet";
  m.depth = depth;
  return m;
}

ModelSection mobilenet(double width) {
  ModelSection m;
  m.preset = "mobilenet_v2";
  m.width = width;
  return m;
}

}  // namespace

TEST_CASE("resnet: CIFAR depths have the published parameter counts") {
  // He et al. 2015, table 6: 0.27M, 0.46M, 0.85M, 1.7M. The 1x1 projection
  // shortcuts (option B) add 2,752 parameters to each.
  Built r20 = build(resnet(20), Shape{3, 32, 32}, 10);
  CHECK(r20.params == 272474);
  CHECK(r20.output == Shape{10});
  CHECK(r20.types["conv2d"] == 21);  // 19 of the plain network + 2 projections
  CHECK(r20.types["batch_norm"] == 21);
  CHECK(r20.types["add"] == 9);
  CHECK(r20.types["dense"] == 1);
  CHECK(r20.buffers == 2 * (16 * 7 + 32 * 7 + 64 * 7));  // running mean and variance of every batch norm
  CHECK(build(resnet(32), Shape{3, 32, 32}, 10).params == 466906);
  CHECK(build(resnet(56), Shape{3, 32, 32}, 10).params == 855770);
  // One channel (Fashion-MNIST) changes only the first convolution: 3*16*9 -> 1*16*9.
  CHECK(build(resnet(20), Shape{1, 28, 28}, 10).params == 272474 - 2 * 16 * 9);
}

TEST_CASE("resnet: depth 18 is torchvision's ResNet-18") {
  Built r18 = build(resnet(18), Shape{3, 224, 224}, 1000);
  CHECK(r18.params == 11689512);
  CHECK(r18.types["conv2d"] == 20);
  CHECK(r18.types["max_pool"] == 1);
  CHECK(r18.output == Shape{1000});
}

TEST_CASE("resnet: depths 34, 50, 101 and 152 are torchvision's, 50 and up with bottleneck blocks") {
  Built r50 = build(resnet(50), Shape{3, 224, 224}, 1000);
  CHECK(r50.params == 25557032);
  CHECK(r50.types["conv2d"] == 1 + 16 * 3 + 4);  // stem, 3 per block, a projection opening each stage
  CHECK(r50.types["batch_norm"] == 53);
  CHECK(r50.types["add"] == 16);
  CHECK(r50.output == Shape{1000});
  CHECK(build(resnet(34), Shape{3, 224, 224}, 1000).params == 21797672);
  CHECK(build(resnet(101), Shape{3, 224, 224}, 1000).params == 44549160);
  CHECK(build(resnet(152), Shape{3, 224, 224}, 1000).params == 60192808);
}

TEST_CASE("resnet: a depth that is not torchvision's or 6n+2 is refused") {
  CHECK_THROWS_WITH_AS(build(resnet(21), Shape{3, 32, 32}, 10),
                       doctest::Contains("not a ResNet depth; use 18, 34, 50, 101 or 152, or 6n+2"), ConfigError);
}

TEST_CASE("mobilenet_v2: width 1.0 at 1000 classes has torchvision's 3,504,872 parameters") {
  Built m = build(mobilenet(1.0), Shape{3, 224, 224}, 1000);
  CHECK(m.params == 3504872);
  CHECK(m.types["depthwise_conv2d"] == 17);
  CHECK(m.types["add"] == 10);  // the blocks that keep their shape
  CHECK(m.types["relu6"] == 35);
  CHECK(m.output == Shape{1000});
  // The parameters do not depend on the input size: 96x96 builds the same network.
  CHECK(build(mobilenet(1.0), Shape{3, 96, 96}, 1000).params == 3504872);
}

TEST_CASE("mobilenet_v2: the width multiplier rounds channels to multiples of 8") {
  CHECK(roundChannels(32 * 0.5) == 16);
  CHECK(roundChannels(24 * 0.35) == 8);
  CHECK(roundChannels(1280 * 1.4) == 1792);
  CHECK(roundChannels(96 * 0.75) == 72);
  // torchvision: mobilenet_v2(width_mult=0.5) has 1,968,680 parameters at 1000 classes.
  CHECK(build(mobilenet(0.5), Shape{3, 224, 224}, 1000).params == 1968680);
  // Two classes, 96x96 (the cats-vs-dogs setting): the head shrinks to 1280*2+2.
  CHECK(build(mobilenet(1.0), Shape{3, 96, 96}, 2).params == 3504872 - 1281 * 1000 + 1281 * 2);
}
