#include "models/model_builder.h"

#include "core/errors.h"
#include "models/gpt_preset.h"
#include "models/mobilenet_v2_preset.h"
#include "models/preset_layers.h"
#include "models/resnet_preset.h"

namespace dtrain {

namespace {

std::vector<LayerSpec> mlpLayers(const ModelSection& m, int64_t classes) {
  PresetLayers p("mlp");
  p.add("flatten", "flatten");
  for (size_t i = 0; i < m.hidden.size(); ++i) {
    std::string id = std::to_string(i + 1);
    p.set(p.add("fc" + id, "dense"), "units", m.hidden[i]);
    p.add("relu" + id, "relu");
    if (m.dropout > 0) p.set(p.add("dropout" + id, "dropout"), "rate", m.dropout);
  }
  p.set(p.add("fc" + std::to_string(m.hidden.size() + 1), "dense"), "units", classes);
  return p.take();
}

// conv3x3(32)-relu-maxpool-conv3x3(64)-relu-maxpool-dense(128)-relu-dense(classes);
// the convolutions pad by 1 so each keeps its input's height and width.
std::vector<LayerSpec> cnnLayers(const ModelSection& m, int64_t classes) {
  PresetLayers p("cnn");
  int64_t filters[2] = {32, 64};
  for (int i = 0; i < 2; ++i) {
    std::string id = std::to_string(i + 1);
    LayerOptions& conv = p.add("conv" + id, "conv2d");
    p.set(conv, "filters", filters[i]);
    p.set(conv, "kernel", int64_t{3});
    p.set(conv, "padding", int64_t{1});
    p.add("relu" + id, "relu");
    p.set(p.add("pool" + id, "max_pool"), "kernel", int64_t{2});
  }
  p.add("flatten", "flatten");
  p.set(p.add("fc1", "dense"), "units", int64_t{128});
  p.add("relu3", "relu");
  if (m.dropout > 0) p.set(p.add("dropout1", "dropout"), "rate", m.dropout);
  p.set(p.add("fc2", "dense"), "units", classes);
  return p.take();
}

}  // namespace

std::vector<LayerSpec> modelLayerSpecs(const ModelSection& model, int64_t classes) {
  if (model.preset == "mlp") return mlpLayers(model, classes);
  if (model.preset == "cnn") return cnnLayers(model, classes);
  if (model.preset == "resnet") return resnetLayers(model, classes);
  if (model.preset == "mobilenet_v2") return mobilenetV2Layers(model, classes);
  if (model.preset == "gpt") return gptLayers(model, classes);
  if (!model.preset.empty())
    throw ConfigError("[model] unknown preset '" + model.preset +
                      "'; known presets: cnn, gpt, mlp, mobilenet_v2, resnet");
  return model.layers;
}

LayerDefaults layerDefaultsOf(const ModelSection& model) {
  LayerDefaults defaults;
  defaults.weight_init = model.init == "glorot" ? InitKind::GlorotUniform : InitKind::HeNormal;
  return defaults;
}

std::unique_ptr<Model> buildModel(const ModelSection& model, const Shape& input_shape, int64_t classes,
                                  const LayerRegistry& registry) {
  auto built =
      std::make_unique<Model>(modelLayerSpecs(model, classes), input_shape, registry, layerDefaultsOf(model));
  // A label per position of a sequence input [T] (a language model's next
  // tokens): the output is [T, classes].
  // Its vocabulary may be padded: columns past `classes` are ignored.
  const Shape& out = built->outputShape();
  const bool per_position =
      input_shape.rank() == 1 && out.rank() == 2 && out[0] == input_shape[0] && out[1] >= classes;
  if (built->outputShape() != Shape{classes} && !per_position) {
    const auto& last = built->nodes().back();
    std::string at = last.pos.str();
    throw ConfigError((at.empty() ? "" : at + ": ") + "[model.layers] the output layer '" +
                      last.layer->name() + "' produces " + built->outputShape().str() +
                      " per sample, but the dataset has " + std::to_string(classes) +
                      " classes; end the model with a dense layer of " + std::to_string(classes) + " units");
  }
  return built;
}

}  // namespace dtrain
