// The layer registry: known types, unknown types, and option handling through
// the factories (required options, ranges, defaults, unknown keys).
#include <doctest/doctest.h>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/conv2d.h"

using namespace dtrain;

namespace {

LayerOptions opts(const std::string& layer, const std::string& type,
                  std::initializer_list<std::pair<std::string, LayerOptions::Value>> entries) {
  LayerOptions o(layer, type, SourcePos{"job.toml", 30, 1});
  int line = 31;
  for (const auto& [key, value] : entries) o.set(key, value, SourcePos{"job.toml", line++, 1});
  return o;
}

std::string configError(const std::string& type, const LayerOptions& o, LayerDefaults defaults = {}) {
  try {
    builtinLayers().create(type, o.layer(), o, defaults);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("registry lists the built-in types") {
  const std::vector<std::string> expected = {"add",
                                             "avg_pool",
                                             "batch_norm",
                                             "causal_self_attention",
                                             "concat",
                                             "conv2d",
                                             "dense",
                                             "depthwise_conv2d",
                                             "dropout",
                                             "embedding",
                                             "flatten",
                                             "gelu",
                                             "global_avg_pool",
                                             "layer_norm",
                                             "max_pool",
                                             "position_embedding",
                                             "relu",
                                             "relu6"};
  CHECK(builtinLayers().types() == expected);
  for (const std::string& t : expected) CHECK(builtinLayers().has(t));
}

TEST_CASE("registry: unknown type lists the known ones") {
  const std::string msg = configError("conv", opts("c1", "conv", {}));
  CHECK(contains(msg, "unknown layer type 'conv' for layer 'c1'"));
  CHECK(contains(msg,
                 "; known types: add, avg_pool, batch_norm, causal_self_attention, concat, conv2d, dense, "
                 "depthwise_conv2d, "
                 "dropout, embedding, flatten, gelu, global_avg_pool, layer_norm, max_pool, "
                 "position_embedding, relu, relu6"));
  CHECK(contains(msg, "did you mean 'conv2d'"));
  CHECK(contains(msg, "job.toml:30:1"));
}

TEST_CASE("registry creates layers from options") {
  LayerDefaults defaults;
  defaults.weight_init = InitKind::GlorotUniform;
  auto conv = builtinLayers().create("conv2d", "conv1",
                                     opts("conv1", "conv2d",
                                          {{"filters", int64_t{16}},
                                           {"kernel", std::vector<int64_t>{3, 5}},
                                           {"padding", int64_t{1}},
                                           {"stride", int64_t{2}},
                                           {"bias", false}}),
                                     defaults);
  CHECK(conv->type() == "conv2d");
  CHECK(conv->name() == "conv1");
  CHECK(conv->setup({Shape{3, 9, 9}}) == Shape{16, 5, 4});
  CHECK(conv->paramSpecs().size() == 1);
  CHECK(conv->paramSpecs()[0].init == InitKind::GlorotUniform);
  CHECK(conv->describe() == "3x5 s2 p1, 16 filters, no bias");

  auto dense = builtinLayers().create(
      "dense", "fc", opts("fc", "dense", {{"units", int64_t{10}}, {"init", std::string("he")}}), defaults);
  CHECK(dense->setup({Shape{20}}) == Shape{10});
  CHECK(dense->paramSpecs()[0].init == InitKind::HeNormal);

  auto pool =
      builtinLayers().create("max_pool", "p", opts("p", "max_pool", {{"kernel", int64_t{3}}}), defaults);
  CHECK(pool->describe() == "3x3 s3 p0");  // stride defaults to the kernel
  auto avg = builtinLayers().create(
      "avg_pool", "a", opts("a", "avg_pool", {{"stride", int64_t{1}}, {"padding", int64_t{1}}}), defaults);
  CHECK(avg->describe() == "2x2 s1 p1");
  auto drop = builtinLayers().create("dropout", "d", opts("d", "dropout", {{"rate", 0.2}}), defaults);
  CHECK(drop->describe() == "rate 0.2");
  auto drop_int =
      builtinLayers().create("dropout", "d", opts("d", "dropout", {{"rate", int64_t{0}}}), defaults);
  CHECK(drop_int->describe() == "rate 0");
  CHECK(builtinLayers().create("relu", "r", opts("r", "relu", {}), defaults)->type() == "relu");
  CHECK(builtinLayers().create("flatten", "f", opts("f", "flatten", {}), defaults)->type() == "flatten");
}

TEST_CASE("registry: option errors name the option and its position") {
  std::string msg = configError("conv2d", opts("conv1", "conv2d", {{"filters", int64_t{0}}}));
  CHECK(contains(msg, "job.toml:31:1"));
  CHECK(contains(msg, "'conv1' filters must be > 0 (got 0)"));
  msg = configError("conv2d", opts("conv1", "conv2d", {}));
  CHECK(contains(msg, "filters"));
  msg = configError("conv2d", opts("c", "conv2d", {{"filters", int64_t{4}}, {"stride", int64_t{0}}}));
  CHECK(contains(msg, "stride must be > 0 (got 0)"));
  msg = configError("conv2d", opts("c", "conv2d", {{"filters", int64_t{4}}, {"padding", int64_t{-1}}}));
  CHECK(contains(msg, "padding must be >= 0 (got -1)"));
  msg = configError("conv2d",
                    opts("c", "conv2d", {{"filters", int64_t{4}}, {"kernel", std::vector<int64_t>{3, 0}}}));
  CHECK(contains(msg, "kernel must be > 0 (got 0)"));
  msg = configError("conv2d", opts("c", "conv2d", {{"filters", int64_t{4}}, {"filter", int64_t{4}}}));
  CHECK(contains(msg, "unknown option 'filter'"));
  msg = configError("dense", opts("fc", "dense", {{"units", int64_t{4}}, {"init", std::string("xavier")}}));
  CHECK(contains(msg, "init must be \"he\", \"glorot\" or \"normal\" (got \"xavier\")"));
  msg =
      configError("conv2d", opts("c", "conv2d", {{"filters", int64_t{4}}, {"init", std::string("normal")}}));
  CHECK(contains(msg, "init must be \"he\" or \"glorot\" (got \"normal\")"));
  msg = configError("dense", opts("fc", "dense", {{"units", int64_t{4}}, {"init_std", 0.1}}));
  CHECK(contains(msg, "init_std applies to init = \"normal\" only"));
  msg = configError("dense", opts("fc", "dense", {{"units", int64_t{-3}}}));
  CHECK(contains(msg, "units must be > 0 (got -3)"));
  msg = configError("dense", opts("fc", "dense", {{"units", 2.5}}));
  CHECK(contains(msg, "units"));
  msg = configError("dropout", opts("d", "dropout", {{"rate", 1.0}}));
  CHECK(contains(msg, "rate must be in [0, 1) (got 1)"));
  msg = configError("max_pool", opts("p", "max_pool", {{"kernel", int64_t{2}}, {"padding", int64_t{2}}}));
  CHECK(contains(msg, "padding must be at most half the kernel"));
  msg = configError("relu", opts("r", "relu", {{"inplace", true}}));
  CHECK(contains(msg, "unknown option 'inplace'"));
}
