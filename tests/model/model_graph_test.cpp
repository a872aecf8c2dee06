// Model: layer lists with named inputs, validation errors naming the layer,
// and gradients of a layer read by several others summed.
#include <doctest/doctest.h>

#include <cmath>

#include "core/config/parse_job.h"
#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/util/rng.h"
#include "models/model_builder.h"

using namespace dtrain;

namespace {

ModelSection modelFrom(const std::string& layers_toml) {
  JobConfig job = parseJobString("[model]\n" + layers_toml, "m.toml");
  return job.model;
}

std::string buildError(const std::string& layers_toml, int64_t classes = 3) {
  try {
    buildModel(modelFrom(layers_toml), Shape{1, 6, 6}, classes, builtinLayers());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kChain = R"(
[[model.layers]]
name = "flat"
type = "flatten"
[[model.layers]]
name = "fc"
type = "dense"
units = 3
)";

}  // namespace

TEST_CASE("a layer list defaults each input to the previous layer") {
  auto m = buildModel(modelFrom(kChain), Shape{1, 6, 6}, 3, builtinLayers());
  REQUIRE(m->nodes().size() == 2);
  CHECK(m->nodes()[0].inputs == std::vector<int>{-1});
  CHECK(m->nodes()[1].inputs == std::vector<int>{0});
  CHECK(m->outputShape() == Shape{3});
  CHECK(m->forwardFlops() == 2 * 36 * 3 + 3);
}

TEST_CASE("backward skips gradients that reach no parameter") {
  auto m = buildModel(modelFrom(R"(
[[model.layers]]
name = "pool"
type = "max_pool"
kernel = 2
[[model.layers]]
name = "flat"
type = "flatten"
[[model.layers]]
name = "fc1"
type = "dense"
units = 4
[[model.layers]]
name = "act"
type = "relu"
[[model.layers]]
name = "fc2"
type = "dense"
units = 3
)"),
                      Shape{1, 6, 6}, 3, builtinLayers());
  REQUIRE(m->nodes().size() == 5);
  // pool and flat see only the network input: fc1 computes no input gradient
  // for them (an mlp's first layer would spend as long on it as on its weights).
  CHECK_FALSE(m->needsGradient(0));
  CHECK_FALSE(m->needsGradient(1));
  CHECK(m->needsGradient(2));
  CHECK(m->needsGradient(3));
  CHECK(m->needsGradient(4));
}

TEST_CASE("model validation errors name the layer and its position") {
  CHECK(buildError(R"(
[[model.layers]]
name = "flat"
type = "flatten"
inputs = ["inptu"]
[[model.layers]]
name = "fc"
type = "dense"
units = 3
)") == "m.toml:3:1: [model.layers] 'flat' reads unknown input 'inptu' (did you mean 'input'?)");
  CHECK(buildError(R"(
[[model.layers]]
name = "a"
type = "relu"
inputs = ["b"]
[[model.layers]]
name = "b"
type = "relu"
inputs = ["a"]
[[model.layers]]
name = "fc"
type = "dense"
units = 3
inputs = ["input"]
)") == "[model.layers] the layers 'a', 'b' form a cycle; every layer must read only earlier results");
  std::string wrong_classes = buildError(kChain, 10);
  CHECK(wrong_classes.find("the output layer 'fc' produces [3] per sample, but the dataset has 10 classes") !=
        std::string::npos);
  std::string no_flatten = buildError(R"(
[[model.layers]]
name = "fc"
type = "dense"
units = 3
)");
  CHECK(no_flatten.find("m.toml:3:1:") == 0);
  CHECK(no_flatten.find("'fc'") != std::string::npos);
  CHECK(no_flatten.find("flatten") != std::string::npos);
  std::string unknown = buildError(R"(
[[model.layers]]
name = "c"
type = "conv"
)");
  CHECK(unknown.find("unknown layer type 'conv'") != std::string::npos);
  CHECK(unknown.find("conv2d") != std::string::npos);
}

TEST_CASE("a layer whose result reaches nothing is an error") {
  CHECK(buildError(R"(
[[model.layers]]
name = "flat"
type = "flatten"
[[model.layers]]
name = "side"
type = "dense"
units = 3
[[model.layers]]
name = "out"
type = "dense"
units = 3
inputs = ["flat"]
)") == "m.toml:6:1: [model.layers] the result of 'side' is not used by any layer; remove it or name it in "
       "another layer's inputs");
}
