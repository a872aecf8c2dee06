#include "core/nn/model.h"

#include <algorithm>
#include <map>

#include "core/config/suggest.h"
#include "core/errors.h"
#include "core/nn/layer_timer.h"
#include "core/nn/parameter_gate.h"
#include "core/nn/residual_add_fusion.h"

namespace dtrain {

namespace {

std::string where(const SourcePos& pos) {
  std::string s = pos.str();
  return s.empty() ? "" : s + ": ";
}

}  // namespace

Model::Model(const std::vector<LayerSpec>& specs, const Shape& input_shape, const LayerRegistry& registry,
             const LayerDefaults& defaults, ModelFusions fusions)
    : Model(specs, ModelCut{{{"input", input_shape, false}}, {}, {}}, registry, defaults, fusions) {}

Model::Model(const std::vector<LayerSpec>& specs, const ModelCut& cut, const LayerRegistry& registry,
             const LayerDefaults& defaults, ModelFusions fusions)
    : cut_inputs_(cut.inputs) {
  if (specs.empty()) throw ConfigError("[model] has no layers");
  if (cut.inputs.empty()) throw Error("a model part reads no inputs");
  if (!cut.layer_indices.empty() && cut.layer_indices.size() != specs.size())
    throw Error("a model part of " + std::to_string(specs.size()) + " layers given " +
                std::to_string(cut.layer_indices.size()) + " layer indices");
  // The cut's inputs are node inputs -1, -2, ...; "input", the network's, is
  // the first of a whole model.
  std::map<std::string, int> external;
  for (size_t k = 0; k < cut.inputs.size(); ++k) external[cut.inputs[k].name] = -1 - static_cast<int>(k);
  std::map<std::string, int> index_of;
  std::vector<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == "input")
      throw ConfigError(where(specs[i].pos) + "[model.layers] 'input' is reserved for the network input");
    if (!index_of.emplace(specs[i].name, static_cast<int>(i)).second)
      throw ConfigError(where(specs[i].pos) + "[model.layers] duplicate layer name '" + specs[i].name + "'");
    names.push_back(specs[i].name);
  }
  for (const ModelCut::Input& in : cut.inputs) names.push_back(in.name);

  // Resolve each spec's inputs to spec indices (negative: the cut's inputs).
  std::vector<std::vector<int>> spec_inputs(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].inputs.empty()) {
      spec_inputs[i].push_back(static_cast<int>(i) - 1);
      continue;
    }
    for (const std::string& in : specs[i].inputs) {
      if (auto ext = external.find(in); ext != external.end() && !index_of.count(in)) {
        spec_inputs[i].push_back(ext->second);
        continue;
      }
      auto it = index_of.find(in);
      if (it == index_of.end()) {
        std::string hint = closestMatch(in, names);
        throw ConfigError(where(specs[i].pos) + "[model.layers] '" + specs[i].name +
                          "' reads unknown input '" + in + "'" +
                          (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
      if (it->second == static_cast<int>(i))
        throw ConfigError(where(specs[i].pos) + "[model.layers] '" + specs[i].name + "' reads itself");
      spec_inputs[i].push_back(it->second);
    }
  }

  // Topological order (Kahn), stable with respect to the list order.
  std::vector<int> pending(specs.size(), 0), order;
  std::vector<std::vector<int>> readers(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    for (int in : spec_inputs[i])
      if (in >= 0) {
        ++pending[i];
        readers[in].push_back(static_cast<int>(i));
      }
  std::vector<bool> done(specs.size(), false);
  while (order.size() < specs.size()) {
    int next = -1;
    for (size_t i = 0; i < specs.size(); ++i)
      if (!done[i] && pending[i] == 0) {
        next = static_cast<int>(i);
        break;
      }
    if (next < 0) {
      std::string cycle;
      for (size_t i = 0; i < specs.size(); ++i)
        if (!done[i]) cycle += (cycle.empty() ? "'" : ", '") + specs[i].name + "'";
      throw ConfigError("[model.layers] the layers " + cycle +
                        " form a cycle; every layer must read only earlier results");
    }
    done[next] = true;
    order.push_back(next);
    for (int r : readers[next]) --pending[r];
  }
  if (order.back() != static_cast<int>(specs.size()) - 1) {
    // The output is the last listed layer; it must not feed another layer.
    throw ConfigError(where(specs.back().pos) + "[model.layers] the last layer '" + specs.back().name +
                      "' is the model's output, so no other layer may read it");
  }

  std::vector<int> node_of(specs.size());
  for (size_t k = 0; k < order.size(); ++k) node_of[order[k]] = static_cast<int>(k);
  consumers_.assign(specs.size(), 0);
  for (int s : order) {
    const LayerSpec& spec = specs[s];
    Node node;
    node.pos = spec.pos;
    node.layer = registry.create(spec.type, spec.name, spec.options, defaults);
    std::vector<Shape> in_shapes;
    for (int in : spec_inputs[s]) {
      int n = in < 0 ? in : node_of[in];
      node.inputs.push_back(n);
      in_shapes.push_back(n < 0 ? cut.inputs[static_cast<size_t>(-1 - n)].shape : nodes_[n].out_shape);
      if (n >= 0) ++consumers_[n];
    }
    const int takes = node.layer->numInputs();
    if (takes == Layer::kAnyInputs ? in_shapes.size() < 2 : static_cast<int>(in_shapes.size()) != takes)
      throw ConfigError(where(spec.pos) + "[model.layers] '" + spec.name + "' (" + spec.type + ") takes " +
                        (takes == Layer::kAnyInputs ? std::string("two or more inputs")
                                                    : std::to_string(takes) + " input(s)") +
                        ", got " + std::to_string(in_shapes.size()) + "; list them in its inputs");
    try {
      node.out_shape = node.layer->setup(in_shapes);
    } catch (const ShapeError& e) {
      throw ShapeError(where(spec.pos) + e.what());
    }
    nodes_.push_back(std::move(node));
    layer_index_.push_back(cut.layer_indices.empty() ? static_cast<int>(nodes_.size()) - 1
                                                     : cut.layer_indices[static_cast<size_t>(s)]);
  }
  // A result read by a later part counts as read: it is never fused away.
  for (const std::string& name : cut.outputs) {
    auto it = index_of.find(name);
    if (it == index_of.end()) throw Error("a model part's output '" + name + "' is none of its layers");
    outputs_.push_back(node_of[it->second]);
    ++consumers_[node_of[it->second]];
  }
  outputs_.push_back(static_cast<int>(nodes_.size()) - 1);
  findAliases(fusions);
  findTiedWeights();
  findTrainedPaths();
  // Every result but the output's must feed some layer: backward would
  // otherwise have no gradient to start such a branch from.
  for (size_t i = 0; i + 1 < nodes_.size(); ++i)
    if (consumers_[i] == 0)
      throw ConfigError(where(nodes_[i].pos) + "[model.layers] the result of '" + nodes_[i].layer->name() +
                        "' is not used by any layer; remove it or name it in another layer's inputs");
}

void Model::findAliases(const ModelFusions& fusions) {
  // A relu (relu6) right after a layer that nobody else reads and that
  // accepts it (conv2d, dense, batch_norm, add) is applied by that layer (one
  // memory pass less each way), and a flatten is a reshape of its input: both
  // share the producer's activation and gradient buffers. So does an add
  // fused into the batch_norm before it; a relu or flatten after such an add
  // goes to that batch_norm.
  alias_of_.assign(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (i + 1 == nodes_.size()) continue;
    const std::string type = node.layer->type();
    if (type == "add") {
      if (fusions.residual_adds) fuseResidualAdd(i);
      continue;
    }
    if (node.inputs.size() != 1 || node.inputs[0] < 0) continue;
    int p = node.inputs[0];
    if (consumers_[p] != 1) continue;
    if (alias_of_[p] >= 0) {
      if (nodes_[p].layer->type() != "add") continue;
      p = alias_of_[p];  // the fused add's sum is computed there
    }
    if (type == "flatten" || ((type == "relu" || type == "relu6") && nodes_[p].layer->fuseActivation(type)))
      alias_of_[i] = p;
  }
}

bool Model::fuseResidualAdd(size_t i) {
  const std::vector<int>& in = nodes_[i].inputs;
  if (in.size() != 2) return false;
  // The later input's producer computes the sum: the other input is ready
  // by then (nodes are in topological order), and may be the network input.
  const int producer = std::max(in[0], in[1]), other = std::min(in[0], in[1]);
  if (producer < 0 || producer == other || consumers_[producer] != 1 || alias_of_[producer] >= 0)
    return false;
  auto* fusable = dynamic_cast<ResidualAddFusion*>(nodes_[producer].layer.get());
  if (!fusable || !fusable->fuseResidualAdd()) return false;
  // The add's read of `other` moves to the producer: consumers_ stays as it is.
  nodes_[producer].inputs.push_back(other);
  alias_of_[i] = producer;
  return true;
}

void Model::findTiedWeights() {
  tied_to_.assign(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& layer = *nodes_[i].layer;
    const std::string tie = layer.tiedLayer();
    if (tie.empty()) continue;
    const std::string self = "[model.layers] '" + layer.name() + "' ties its weight to '" + tie + "'";
    for (size_t j = 0; j < nodes_.size(); ++j)
      if (nodes_[j].layer->name() == tie) tied_to_[i] = static_cast<int>(j);
    if (tied_to_[i] < 0)
      throw ConfigError(where(nodes_[i].pos) + self + ", which is not a layer of this model" +
                        (cut_inputs_.size() == 1 && cut_inputs_[0].name == "input"
                             ? std::string()
                             : " part (a pipeline stage)"));
    const std::vector<ParamSpec> specs = nodes_[static_cast<size_t>(tied_to_[i])].layer->paramSpecs();
    if (specs.empty() || specs[0].shape != layer.tiedShape())
      throw ConfigError(where(nodes_[i].pos) + self + ", whose first parameter is " +
                        (specs.empty() ? std::string("absent") : specs[0].shape.str()) + ", not the " +
                        layer.tiedShape().str() + " it needs");
  }
}

void Model::findTrainedPaths() {
  // Nodes come in topological order, so every input is settled before its readers.
  trained_path_.assign(nodes_.size(), false);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    bool trained = !nodes_[i].layer->paramSpecs().empty() || tied_to_[i] >= 0;
    for (int in : nodes_[i].inputs)
      trained =
          trained || (in >= 0 ? trained_path_[in] : cut_inputs_[static_cast<size_t>(-1 - in)].needs_gradient);
    trained_path_[i] = trained;
  }
}

void Model::registerParams(ParamStore& store) const {
  for (const Node& n : nodes_)
    for (const ParamSpec& p : n.layer->paramSpecs()) store.add(n.layer->name(), p);
}

void Model::registerBuffers(ParamStore& buffers) const {
  for (const Node& n : nodes_)
    for (const ParamSpec& b : n.layer->bufferSpecs()) buffers.add(n.layer->name(), b);
}

void Model::bind(const ParamStore& store, Tensor grads, int64_t capacity, const ParamStore* buffers) {
  size_t buffer_entry = 0;
  for (Node& n : nodes_) {
    const std::vector<ParamSpec> specs = n.layer->bufferSpecs();
    if (specs.empty()) continue;
    if (!buffers)
      throw Error("layer '" + n.layer->name() + "' has buffers but the model was bound without any");
    std::vector<Tensor> views;
    for (const ParamSpec& spec : specs) {
      const ParamEntry& e = buffers->entries().at(buffer_entry);
      if (e.name != n.layer->name() + "." + spec.name || e.shape != spec.shape)
        throw Error("buffer layout mismatch at " + e.name);
      views.push_back(buffers->view(buffers->params(), buffer_entry));
      ++buffer_entry;
    }
    n.layer->bindBuffers(views);
  }
  store_ = &store;
  bound_grads_ = grads;
  capacity_ = capacity;
  bindParams();
  allocateActivations();
}

Model::ActivationPlan Model::planActivations(int64_t capacity) const {
  ActivationPlan plan;
  for (const Node& n : nodes_) plan.slots = std::max(plan.slots, n.inputs.size());
  // A cut input read by several layers sums their gradients through scratch too.
  std::vector<int> input_readers(cut_inputs_.size(), 0);
  for (const Node& n : nodes_)
    for (int in : n.inputs)
      if (in < 0) ++input_readers[static_cast<size_t>(-1 - in)];
  for (size_t k = 0; k < cut_inputs_.size(); ++k)
    if (input_readers[k] > 1)
      plan.scratch = std::max(plan.scratch, cut_inputs_[k].shape.withBatch(capacity).numel());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    plan.shapes.push_back(nodes_[i].out_shape.withBatch(capacity));
    // Also a fused relu's result may be read by several layers (a residual input).
    if (consumers_[i] > 1) plan.scratch = std::max(plan.scratch, plan.shapes.back().numel());
  }
  return plan;
}

int64_t Model::plannedActivationBytes(int64_t capacity) const {
  const ActivationPlan plan = planActivations(capacity);
  const auto element = static_cast<int64_t>(elementSize(activationDType()));
  int64_t elements = plan.scratch * static_cast<int64_t>(plan.slots);
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (alias_of_[i] < 0) elements += 2 * plan.shapes[i].numel();
  return elements * element;
}

void Model::allocateActivations() {
  const Device device = bound_grads_.device();
  const DType dtype = activationDType();
  const ActivationPlan plan = planActivations(capacity_);
  act_storage_.clear();
  grad_storage_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Shape& s = plan.shapes[i];
    if (alias_of_[i] >= 0) {
      act_storage_.push_back(act_storage_[alias_of_[i]].reshape(s));
      grad_storage_.push_back(grad_storage_[alias_of_[i]].reshape(s));
      continue;
    }
    act_storage_.push_back(Tensor::empty(s, device, dtype));
    grad_storage_.push_back(Tensor::empty(s, device, dtype));
  }
  scratch_storage_.clear();
  for (size_t k = 0; k < plan.slots; ++k)
    scratch_storage_.push_back(Tensor::empty(Shape{plan.scratch}, device, dtype));
  act_ = act_storage_;
  grad_ = grad_storage_;
}

std::vector<const Tensor*> Model::inputsOf(const Node& node, const std::vector<const Tensor*>& inputs) const {
  std::vector<const Tensor*> in;
  for (int i : node.inputs) in.push_back(i < 0 ? inputs[static_cast<size_t>(-1 - i)] : &act_[i]);
  return in;
}

std::vector<const Tensor*> Model::outputs() const {
  std::vector<const Tensor*> out;
  for (size_t k = 0; k < outputs_.size(); ++k)
    out.push_back(outputs_in_floats_.empty() ? &act_[outputs_[k]] : &outputs_in_floats_[k]);
  return out;
}

const Tensor& Model::forward(const Tensor& input, const LayerContext& ctx) {
  one_input_.assign(1, &input);  // kept, so a whole model's step allocates nothing here
  forward(one_input_, ctx);
  return outputs_in_floats_.empty() ? act_.back() : outputs_in_floats_.back();
}

void Model::backward(const Tensor& input, const Tensor& doutput, const LayerContext& ctx) {
  one_input_.assign(1, &input);
  one_doutput_.assign(1, &doutput);
  no_dinput_.assign(1, nullptr);
  backward(one_input_, one_doutput_, no_dinput_, ctx);
}

void Model::forward(const std::vector<const Tensor*>& inputs, const LayerContext& ctx) {
  const std::vector<const Tensor*>& in = readableInputs(inputs, /*round=*/true);  // checks the count
  int64_t n = inputs[0]->dim(0);
  if (n > capacity_)
    throw Error("batch of " + std::to_string(n) + " exceeds the model's capacity " +
                std::to_string(capacity_));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    act_[i] = act_storage_[i].narrow(0, n);
    grad_[i] = grad_storage_[i].narrow(0, n);
  }
  castParamsTo16Bits();
  LayerContext c = ctx;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (alias_of_[i] >= 0) continue;
    c.layer_index = layer_index_[i];
    if (ctx.parameter_gate) ctx.parameter_gate->beforeNode(static_cast<int>(i), false);
    if (ctx.layer_timer) ctx.layer_timer->begin(static_cast<int>(i), false);
    nodes_[i].layer->forward(inputsOf(nodes_[i], in), act_[i], c);
    roundIn16Bits(act_[i]);
    if (ctx.layer_timer) ctx.layer_timer->end(static_cast<int>(i), false);
    if (ctx.parameter_gate) ctx.parameter_gate->afterNode(static_cast<int>(i), false);
  }
  resultsInFloats(n);
}

void Model::backward(const std::vector<const Tensor*>& inputs, const std::vector<const Tensor*>& doutputs,
                     const std::vector<Tensor*>& dinputs, const LayerContext& ctx) {
  const std::vector<const Tensor*>& in = readableInputs(inputs, /*round=*/false);  // as forward rounded them
  if (ctx.backward_part == BackwardPart::Params) {
    backwardParams(in, ctx);
    return;
  }
  const bool inputs_only = ctx.backward_part == BackwardPart::Inputs;
  if (doutputs.size() != outputs_.size() || dinputs.size() != cut_inputs_.size())
    throw Error("a model part of " + std::to_string(outputs_.size()) + " outputs and " +
                std::to_string(cut_inputs_.size()) + " inputs was given " + std::to_string(doutputs.size()) +
                " and " + std::to_string(dinputs.size()) + " gradients");
  // A node read by several layers sums their gradients: the first reader (in
  // reverse order) writes, later readers write to scratch and add. A result
  // out starts from the gradient a later part sent, which its readers here add to.
  std::vector<int> written(nodes_.size(), 0);
  for (size_t k = 0; k < outputs_.size(); ++k) {
    assignConverted(grad_[outputs_[k]], *doutputs[k]);
    roundIn16Bits(grad_[outputs_[k]]);
    written[outputs_[k]] = 1;
  }
  std::vector<int>& input_written = input_written_;
  input_written.assign(cut_inputs_.size(), 0);
  LayerContext c = ctx;
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    Node& node = nodes_[i];
    if (alias_of_[i] >= 0) {
      ++written[alias_of_[i]];  // its gradient already is the producer's
      continue;
    }
    if (!trained_path_[i]) continue;  // no parameters here or upstream: nothing to compute
    c.layer_index = layer_index_[static_cast<size_t>(i)];
    std::vector<Tensor*> din;
    std::vector<std::pair<Tensor*, Tensor>> to_add;  // (the gradient summed into, the slot's)
    to_add.reserve(node.inputs.size());
    for (int in : node.inputs) {
      Tensor* target = nullptr;
      int* count = nullptr;
      if (in < 0) {  // a cut input: its gradient goes back to the part it came from, if it needs one
        const auto k = static_cast<size_t>(-1 - in);
        if (cut_inputs_[k].needs_gradient && dinputs[k]) {
          target = inputGradientTarget(k, *dinputs[k]);
          count = &input_written[k];
        }
      } else if (trained_path_[in]) {
        target = &grad_[in];
        count = &written[in];
      }
      if (!target) {
        // Neither the network input nor a result computed from it alone needs a
        // gradient (an mlp's first dense layer would otherwise compute one for
        // its flattened input: as much work as its weight gradient).
        din.push_back(nullptr);
      } else if ((*count)++ == 0) {
        din.push_back(target);
      } else {
        Tensor& slot = scratch_storage_[din.size()];
        to_add.emplace_back(target, slot.narrow(0, target->numel()).reshape(target->shape()));
        din.push_back(&to_add.back().second);
      }
    }
    const bool split = inputs_only && node.layer->splitsBackward();
    c.backward_part = split ? BackwardPart::Inputs : BackwardPart::All;
    if (ctx.parameter_gate) ctx.parameter_gate->beforeNode(i, true);
    if (ctx.layer_timer) ctx.layer_timer->begin(i, true);
    node.layer->backward(inputsOf(node, in), act_[i], grad_[i], din, c);
    // A 16-bit path stores each input gradient, and each sum of two, in 16 bits.
    if (isSixteenBit(precision_))
      for (Tensor* d : din)
        if (d) roundIn16Bits(*d);
    for (auto& [target, g] : to_add) {
      target->add(g);
      roundIn16Bits(*target);
    }
    if (ctx.layer_timer) ctx.layer_timer->end(i, true);
    if (ctx.parameter_gate) ctx.parameter_gate->afterNode(i, true);
    if (ctx.backward_listener && !split) ctx.backward_listener->layerDone(i);
  }
  inputGradientsInFloats(dinputs, input_written);
}

void Model::backwardParams(const std::vector<const Tensor*>& inputs, const LayerContext& ctx) {
  LayerContext c = ctx;
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    Node& node = nodes_[static_cast<size_t>(i)];
    if (alias_of_[static_cast<size_t>(i)] >= 0 || !trained_path_[static_cast<size_t>(i)] ||
        !node.layer->splitsBackward())
      continue;
    c.layer_index = layer_index_[static_cast<size_t>(i)];
    const std::vector<Tensor*> no_din(node.inputs.size(), nullptr);
    if (ctx.parameter_gate) ctx.parameter_gate->beforeNode(i, true);
    if (ctx.layer_timer) ctx.layer_timer->begin(i, true);
    node.layer->backward(inputsOf(node, inputs), act_[static_cast<size_t>(i)], grad_[static_cast<size_t>(i)],
                         no_din, c);
    if (ctx.layer_timer) ctx.layer_timer->end(i, true);
    if (ctx.parameter_gate) ctx.parameter_gate->afterNode(i, true);
    if (ctx.backward_listener) ctx.backward_listener->layerDone(i);
  }
}

int64_t Model::activationBytes() const {
  size_t bytes = 0;
  for (size_t i = 0; i < act_storage_.size(); ++i)
    if (alias_of_[i] < 0) bytes += act_storage_[i].bytes() + grad_storage_[i].bytes();
  for (const Tensor& t : scratch_storage_) bytes += t.bytes();
  return static_cast<int64_t>(bytes);
}

int64_t Model::forwardFlops() const {
  int64_t f = 0;
  for (const Node& n : nodes_) f += n.layer->forwardFlops();
  return f;
}

}  // namespace dtrain
