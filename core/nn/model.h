// Model: a DAG of named layers over one input ("input"), built from layer
// specs through a LayerRegistry. The last layer of the list is the output.
//
// Ownership and threading: a Model owns its layers, activations and activation
// gradients; it is one replica, used by one thread at a time. Parameters live in
// a ParamStore (shared by all replicas); each replica binds its own gradient
// buffer. Activations are allocated once for `capacity` samples.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/param_store.h"
#include "core/nn/precision.h"

namespace dtrain {

// The fusions a Model may make, all on by default; tests turn one off to
// compare a fused model with the same model unfused.
struct ModelFusions {
  // A batch_norm (any ResidualAddFusion) whose only reader is an add of two
  // inputs computes the sum itself; the add becomes an alias of its output.
  bool residual_adds = true;
};

// A part of a model, as a pipeline stage runs it: the results of earlier
// parts it reads (by layer name; "input" is the network's), and its results
// that later parts read. A whole model is the part that reads "input" alone
// and whose only result out is its last layer's.
struct ModelCut {
  struct Input {
    std::string name;
    Shape shape;                  // per sample
    bool needs_gradient = false;  // backward computes its gradient (to send back)
  };
  std::vector<Input> inputs;
  std::vector<std::string> outputs;  // results out besides the last layer's
  // Per spec, its layer's place in the whole model's topological order:
  // dropout masks derive from it, so a part draws the whole model's masks
  // (empty: the part's own order).
  std::vector<int> layer_indices;
};

class Model {
 public:
  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;  // node indices; -1 = the network input
    Shape out_shape;          // per sample
    SourcePos pos;
  };

  // Creates the layers, resolves inputs (default: the previous layer), orders
  // them topologically and runs setup(). Errors name the layer and its position:
  // unknown input, cycle, shape mismatch, unknown type or option.
  Model(const std::vector<LayerSpec>& specs, const Shape& input_shape, const LayerRegistry& registry,
        const LayerDefaults& defaults, ModelFusions fusions = {});
  // A part of a model: its layers read the cut's inputs by name, and its
  // outputs are never fused away (a later part reads them as they are).
  Model(const std::vector<LayerSpec>& specs, const ModelCut& cut, const LayerRegistry& registry,
        const LayerDefaults& defaults, ModelFusions fusions = {});

  // Adds every layer's parameters to `store` (for the replica that owns the store).
  void registerParams(ParamStore& store) const;
  // Adds every layer's buffers (untrained state such as running statistics) to
  // `buffers`, a store of their own that the optimizer never sees.
  void registerBuffers(ParamStore& buffers) const;
  // Points the layers at the store's parameters and at `grads` (same layout),
  // at `buffers` (laid out by registerBuffers; may be null when no layer has
  // any), and sizes activations for up to `capacity` samples, on the device of
  // `grads` (the layers must be that device's: see core/nn/device_layers.h).
  void bind(const ParamStore& store, Tensor grads, int64_t capacity, const ParamStore* buffers = nullptr);

  // The arithmetic of forward and backward (core/nn/precision.h); fp32 until
  // set. In bf16 and fp16 on the CPU the model rounds to the format every
  // value a 16-bit path stores: the network input, each layer's result and
  // each activation gradient (the loss's included), and, at the start of
  // every forward, the Product layers' parameters into a copy of its own
  // that those layers read; parameter gradients stay fp32.
  // On a GPU the activations and their gradients are 16-bit tensors
  // (DType::BF16 / F16) that the layers read and write, and the Product
  // layers read a 16-bit copy of the parameters (halfParams()). What crosses
  // the model's edges stays float: the cut inputs are converted in, the
  // results out (forward's return, outputs()) and the input gradients
  // (backward's dinputs) are converted out, and the gradients of the results
  // are converted in, so the loss, the strategies and the pipeline's messages
  // see floats holding 16-bit values, as on the CPU. Before or after bind().
  void setPrecision(Precision precision);
  Precision precision() const { return precision_; }
  // The dtype of the activations bind() allocates: BF16 or F16 for a 16-bit
  // precision on a GPU, else F32.
  DType activationDType() const;
  // On a GPU in a 16-bit precision: every parameter in the flat buffer's
  // layout, in the activations' dtype (undefined otherwise). Each forward
  // casts the fp32 masters into it first, unless an optimizer update wrote
  // it from the masters it had just computed (a fused cast-and-update) and
  // said so through paramsCastByUpdate() since the last forward.
  Tensor& halfParams() { return half_params_; }
  void paramsCastByUpdate() { half_params_current_ = half_params_.defined() && half_params_.numel() > 0; }
  // The masters changed otherwise (a broadcast, a load): the next forward casts.
  void paramsChangedElsewhere() { half_params_current_ = false; }

  // Forward of `n` samples (n <= capacity); returns the output activations [n, ...].
  const Tensor& forward(const Tensor& input, const LayerContext& ctx);
  // Backward from the gradient of the loss w.r.t. the output (same shape as forward's
  // result). Parameter gradients accumulate into the bound gradient buffer.
  // Nodes run in reverse order; ctx.backward_listener, when set, hears
  // layerDone(i) after each node that computes anything.
  void backward(const Tensor& input, const Tensor& doutput, const LayerContext& ctx);
  // A part's forward, from its cut's inputs in order; then outputs() holds
  // its results out.
  void forward(const std::vector<const Tensor*>& inputs, const LayerContext& ctx);
  // A part's backward: `doutputs` the gradients of its results out (in
  // outputs() order); `dinputs` receive the gradients of the inputs that
  // need one (the others' entries may be null).
  // ctx.backward_part Inputs computes the gradients of the inputs only (the
  // layers that split their backward leave their parameter gradients); a
  // later call with Params and the same inputs computes those from the
  // gradients the first call left in place (doutputs and dinputs are then
  // not read; empty will do). The listener hears each layer once, when its
  // parameter gradients are complete.
  void backward(const std::vector<const Tensor*>& inputs, const std::vector<const Tensor*>& doutputs,
                const std::vector<Tensor*>& dinputs, const LayerContext& ctx);
  // The results out: the cut's outputs, then the last layer's.
  std::vector<const Tensor*> outputs() const;

  const std::vector<Node>& nodes() const { return nodes_; }
  // The node whose memory node i shares instead of computing anything (a relu
  // or relu6 fused into the layer before it, a flatten of its input, an add
  // fused into the batch_norm before it), or -1. A fused add's producer lists
  // the add's other input as its own second input in nodes().
  int aliasOf(size_t i) const { return alias_of_[i]; }
  // The node whose first parameter node i uses as its weight (weight tying,
  // Layer::tiedLayer), or -1.
  int tiedTo(size_t i) const { return tied_to_[i]; }
  // Whether backward computes the gradient of node i's output: only when node i
  // or a node upstream of it has parameters.
  bool needsGradient(size_t i) const { return trained_path_[i]; }
  // The first cut input's (a whole model's: the network's input).
  const Shape& inputShape() const { return cut_inputs_[0].shape; }
  const Shape& outputShape() const { return nodes_.back().out_shape; }
  int64_t forwardFlops() const;
  // The activations and their gradients bind() allocated (shared ones once):
  // what the model holds per batch of `capacity` samples.
  int64_t activationBytes() const;
  // The same before bind(), for a batch of `capacity` samples: what bind
  // would allocate (a prediction: layers' own workspaces are not in it).
  int64_t plannedActivationBytes(int64_t capacity) const;

 private:
  // What allocateActivations makes for `capacity` samples: each node's
  // activation and gradient (none for an alias), and `slots` scratch
  // tensors of `scratch` elements.
  struct ActivationPlan {
    std::vector<Shape> shapes;
    int64_t scratch = 0;
    size_t slots = 0;
  };
  ActivationPlan planActivations(int64_t capacity) const;
  std::vector<const Tensor*> inputsOf(const Node& node, const std::vector<const Tensor*>& inputs) const;
  // backward's second pass (BackwardPart::Params): the parameter gradients
  // of the layers that split their backward.
  void backwardParams(const std::vector<const Tensor*>& inputs, const LayerContext& ctx);
  void findAliases(const ModelFusions& fusions);
  // Fuses add node i into the producer of its later input; returns whether it did.
  bool fuseResidualAdd(size_t i);
  void findTrainedPaths();
  // Weight tying (Layer::tiedLayer): fills tied_to_; ConfigError for a
  // missing layer or a table of the wrong shape.
  void findTiedWeights();
  // Points the layers at the store's parameters (Product layers at the
  // rounded copy in a 16-bit precision) and at the gradient buffer.
  void bindParams();
  // The activations, their gradients and the scratch sums for capacity_
  // samples, of activationDType(), on the gradients' device.
  void allocateActivations();
  // Whether the layers compute in 16-bit tensors (a GPU in bf16 or fp16).
  bool deviceIn16Bits() const;
  // CPU 16-bit precisions: rounds the float tensor `t` in place to the
  // format (no-op otherwise: a 16-bit tensor is rounded already).
  void roundIn16Bits(Tensor& t) const;
  // The cut inputs as the layers read them: in a 16-bit precision the network
  // input rounded into a buffer of the model's (on a GPU every cut input,
  // converted to 16 bits); the rest as given. Throws when their count is not
  // the cut's.
  const std::vector<const Tensor*>& readableInputs(const std::vector<const Tensor*>& inputs, bool round);
  // Whether cut input k is read, and only by layers that take token ids.
  bool readsOnlyTokenIds(size_t k) const;
  // forward's start: the Product layers' 16-bit parameters from the masters.
  void castParamsTo16Bits();
  // forward's end on a GPU in 16 bits: the results out converted to floats.
  void resultsInFloats(int64_t n);
  // dst = src, converting between float and 16 bits when their dtypes differ.
  static void assignConverted(Tensor& dst, const Tensor& src);
  // Where backward writes cut input k's gradient: the caller's `given`, or on
  // a GPU in 16 bits a 16-bit buffer of the model's, converted into `given`
  // by inputGradientsInFloats once backward is done.
  Tensor* inputGradientTarget(size_t k, Tensor& given);
  void inputGradientsInFloats(const std::vector<Tensor*>& dinputs, const std::vector<int>& written);

  std::vector<Node> nodes_;                  // topological order; output last
  std::vector<ModelCut::Input> cut_inputs_;  // node input -1 - k is cut_inputs_[k]
  std::vector<int> layer_index_;             // per node: LayerContext::layer_index (ModelCut::layer_indices)
  // The whole model's forward and backward pass their one input through these.
  std::vector<const Tensor*> one_input_, one_doutput_;
  std::vector<Tensor*> no_dinput_;
  std::vector<int> input_written_;  // backward's count per cut input
  std::vector<int> outputs_;        // the results out: the cut's, then the last node
  std::vector<int> consumers_;      // number of layers reading each node
  std::vector<int> alias_of_;       // see aliasOf()
  std::vector<bool> trained_path_;  // see needsGradient()
  std::vector<int> tied_to_;        // per node: the node whose first parameter it uses as weight, or -1
  std::vector<Tensor> act_storage_, grad_storage_, act_, grad_;
  // For nodes read by several layers: one buffer per input slot, so a layer
  // reading several shared nodes (an add of two branches) gets one for each.
  std::vector<Tensor> scratch_storage_;
  int64_t capacity_ = 0;
  Precision precision_ = Precision::Fp32;
  const ParamStore* store_ = nullptr;  // bound (bind()); null before
  Tensor bound_grads_;
  // 16-bit precisions: the Product layers' parameters rounded at each
  // forward, and their (offset, count) ranges in the flat buffer.
  Tensor rounded_params_;
  std::vector<std::pair<int64_t, int64_t>> rounded_ranges_;
  std::vector<Tensor> rounded_input_storage_,
      rounded_inputs_;  // per cut input: the network input's rounded copy
  std::vector<const Tensor*> readable_inputs_;
  // A GPU in 16 bits: the parameters' 16-bit copy (halfParams()), whether an
  // update wrote it since the last forward, the results out in floats, and
  // the cut inputs' 16-bit gradients.
  Tensor half_params_;
  bool half_params_current_ = false;
  std::vector<Tensor> outputs_in_floats_storage_, outputs_in_floats_;
  std::vector<Tensor> input_grad_storage_, input_grads_;
};

}  // namespace dtrain
