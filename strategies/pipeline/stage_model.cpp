#include "strategies/pipeline/stage_model.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

// Every spec's inputs by name, the default (the layer listed before, or the
// network's input for the first) written out.
std::map<std::string, std::vector<std::string>> namedInputs(const std::vector<LayerSpec>& specs) {
  std::map<std::string, std::vector<std::string>> out;
  for (size_t i = 0; i < specs.size(); ++i)
    out[specs[i].name] = !specs[i].inputs.empty() ? specs[i].inputs
                         : i == 0                 ? std::vector<std::string>{"input"}
                                                  : std::vector<std::string>{specs[i - 1].name};
  return out;
}

std::map<std::string, int> nodeIndex(const Model& whole) {
  std::map<std::string, int> out;
  for (size_t i = 0; i < whole.nodes().size(); ++i) out[whole.nodes()[i].layer->name()] = static_cast<int>(i);
  return out;
}

const LayerSpec& specNamed(const std::vector<LayerSpec>& specs, const std::string& name) {
  for (const LayerSpec& s : specs)
    if (s.name == name) return s;
  throw Error("pipeline stage: no layer spec named '" + name + "'");
}

}  // namespace

StagePart stagePart(const Model& whole, const std::vector<LayerSpec>& specs, const std::vector<int>& stage_of,
                    int stage) {
  const auto& nodes = whole.nodes();
  if (stage_of.size() != nodes.size())
    throw Error("pipeline stage: " + std::to_string(stage_of.size()) + " stage numbers for " +
                std::to_string(nodes.size()) + " layers");
  const std::map<std::string, std::vector<std::string>> inputs = namedInputs(specs);
  const std::map<std::string, int> index = nodeIndex(whole);
  StagePart part;
  int last = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (stage_of[i] != stage) continue;
    LayerSpec spec = specNamed(specs, nodes[i].layer->name());
    spec.inputs = inputs.at(spec.name);
    // Tied to a layer of another stage: a weight of its own here (SharedWeight).
    if (const std::string tie = nodes[i].layer->tiedLayer();
        !tie.empty() && stage_of[static_cast<size_t>(index.at(tie))] != stage)
      spec.options.set("tie", std::string(), spec.pos);
    // What it reads from earlier stages comes in through the cut.
    for (const std::string& in : spec.inputs) {
      const bool network = in == "input";
      if (!network && stage_of[static_cast<size_t>(index.at(in))] == stage) continue;
      auto known = std::find_if(part.cut.inputs.begin(), part.cut.inputs.end(),
                                [&in](const ModelCut::Input& c) { return c.name == in; });
      if (known != part.cut.inputs.end()) continue;
      const int producer = network ? -1 : index.at(in);
      part.cut.inputs.push_back(
          ModelCut::Input{in, network ? whole.inputShape() : nodes[static_cast<size_t>(producer)].out_shape,
                          !network && whole.needsGradient(static_cast<size_t>(producer))});
    }
    part.specs.push_back(std::move(spec));
    part.cut.layer_indices.push_back(static_cast<int>(i));
    last = static_cast<int>(i);
  }
  if (part.specs.empty()) throw Error("pipeline stage " + std::to_string(stage) + " holds no layers");
  // Its results a later stage reads (the last one leaves in any case).
  for (const LayerSpec& spec : part.specs) {
    if (spec.name == nodes[static_cast<size_t>(last)].layer->name()) continue;
    bool read_later = false;
    for (size_t j = 0; j < nodes.size() && !read_later; ++j) {
      if (stage_of[j] <= stage) continue;
      const std::vector<std::string>& reads = inputs.at(nodes[j].layer->name());
      read_later = std::find(reads.begin(), reads.end(), spec.name) != reads.end();
    }
    if (read_later) part.cut.outputs.push_back(spec.name);
  }
  return part;
}

std::vector<SharedWeight> sharedAcrossStages(const Model& whole, const std::vector<int>& stage_of) {
  const std::map<std::string, int> index = nodeIndex(whole);
  std::vector<SharedWeight> out;
  for (size_t i = 0; i < whole.nodes().size(); ++i) {
    const std::string tie = whole.nodes()[i].layer->tiedLayer();
    if (tie.empty()) continue;
    const int owner_stage = stage_of.at(static_cast<size_t>(index.at(tie)));
    if (owner_stage != stage_of[i])
      out.push_back(SharedWeight{tie, whole.nodes()[i].layer->name(), owner_stage, stage_of[i]});
  }
  return out;
}

std::vector<LayerCost> layerCosts(const Model& whole, const std::vector<LayerSpec>& specs) {
  const std::map<std::string, std::vector<std::string>> inputs = namedInputs(specs);
  const std::map<std::string, int> index = nodeIndex(whole);
  std::vector<LayerCost> out;
  for (const Model::Node& node : whole.nodes()) {
    LayerCost c;
    c.name = node.layer->name();
    for (const std::string& in : inputs.at(c.name)) c.inputs.push_back(in == "input" ? -1 : index.at(in));
    c.seconds = 3.0 * static_cast<double>(node.layer->forwardFlops());
    c.out_floats = node.out_shape.numel();
    // Its output and the gradient of it, unless it shares another layer's memory.
    c.held_floats =
        whole.aliasOf(static_cast<size_t>(&node - whole.nodes().data())) < 0 ? 2 * c.out_floats : 0;
    for (const ParamSpec& p : node.layer->paramSpecs()) c.param_floats += p.shape.numel();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace dtrain::pipeline
