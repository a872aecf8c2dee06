// Turns the [model] table into a Model: a preset (mlp, cnn, resnet,
// mobilenet_v2: models/*_preset.h) expanded into its
// layer list, or the job's own [[model.layers]]. The output must have one
// value per class of the dataset.
#pragma once
#include <memory>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"

namespace dtrain {

// The layer list the model section describes (a preset expanded, or as written).
std::vector<LayerSpec> modelLayerSpecs(const ModelSection& model, int64_t classes);

// The defaults its layers take ([model] init).
LayerDefaults layerDefaultsOf(const ModelSection& model);

// Builds one replica. `input_shape` is the dataset's sample shape [C,H,W].
std::unique_ptr<Model> buildModel(const ModelSection& model, const Shape& input_shape, int64_t classes,
                                  const LayerRegistry& registry);

}  // namespace dtrain
