// The layer contract (Caffe-style): setup checks the inputs' per-sample shapes
// and returns the output's; forward computes a batch; backward accumulates
// parameter gradients (+=) and overwrites input gradients.
//
// Ownership and threading: a Layer instance belongs to one model replica and is
// used by one thread at a time. Its parameters are views into the shared flat
// parameter buffer and its parameter gradients views into the replica's own flat
// gradient buffer (bind()). Layers may keep scratch buffers as members.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/nn/precision.h"
#include "core/tensor/tensor.h"

namespace dtrain {

struct StepScalars;

// Normal: N(0, init_std^2), GPT-2's fixed-scale initialisation.
enum class InitKind { Zeros, Ones, HeNormal, GlorotUniform, Normal };

// One trainable tensor of a layer, as the layer declares it after setup().
struct ParamSpec {
  std::string name;  // local name: "weight", "bias"
  Shape shape;
  InitKind init = InitKind::Zeros;
  int64_t fan_in = 0;
  int64_t fan_out = 0;
  double init_std = 0.0;  // InitKind::Normal
  // A lookup table (token or position embeddings): AdamW's weight decay
  // passes it by unless [optimizer] decay_embeddings says otherwise, though
  // it is a matrix.
  bool embedding_table = false;
};

// Receives Model::backward's progress: layerDone(i) once node i's backward
// has finished, so its parameter gradients are final for this pass. Called
// from the thread running backward; must be cheap.
class BackwardListener {
 public:
  virtual ~BackwardListener() = default;
  virtual void layerDone(int node) = 0;
};

// Sums small per-channel vectors (batch-norm statistics) over every replica
// computing one batch: the compute threads of this process, and, with
// [strategy] sync_batchnorm, every rank. All of them call allReduceSum at the
// same layer with the same n; each gets the element-wise sum. `data` is in
// the memory of the replica's device.
class StatsReducer {
 public:
  virtual ~StatsReducer() = default;
  virtual void allReduceSum(double* data, int64_t n) = 0;
};

// Which gradients a backward call computes. A pipeline stage may compute its
// input gradients first, send them to the stage before, and its parameter
// gradients after (Zero Bubble's B and W passes): a layer whose
// splitsBackward() is true is then called twice, with Inputs (din as usual,
// no parameter gradient) and later with Params (every din null, the same in,
// out and dout). Other layers always get All.
enum class BackwardPart : uint8_t { All, Inputs, Params };

// Per-call facts a layer may need.
struct LayerContext {
  bool training = true;
  // Mixed from the job seed and the global step: dropout masks derive from it,
  // the layer's index and the sample's index in the global batch, so they do not
  // depend on how the batch is split across threads or ranks.
  uint64_t seed = 0;
  int64_t sample_offset = 0;  // index of this slice's first sample in the global batch
  // GPU training passes: seed and sample_offset as device memory reads them
  // (core/backend/step_scalars.h), so a pass recorded as a CUDA graph
  // replays with each step's own; null = the kernels take the two above.
  const StepScalars* step_scalars = nullptr;
  int layer_index = 0;
  // Told after each layer's backward (multi-process runs start reducing the
  // gradients that are final while backward goes on); null = nobody listens.
  class BackwardListener* backward_listener = nullptr;
  // Training passes of layers with batch statistics sum them through it; null
  // = this replica computes the whole batch alone (its own sums are the batch's).
  StatsReducer* stats_reducer = nullptr;
  // Whether this replica writes the shared buffers (running statistics) in
  // training passes: one replica does, after the statistics are reduced.
  bool updates_buffers = true;
  // Told around each layer's forward and backward (dtrain bench step); null
  // in training.
  class LayerTimer* layer_timer = nullptr;
  // Told around each node's forward and backward where the parameters are
  // gathered on demand (core/nn/parameter_gate.h); null: all are in memory.
  class ParameterGate* parameter_gate = nullptr;
  // backward's part (BackwardPart); All unless the layer splitsBackward().
  BackwardPart backward_part = BackwardPart::All;
  // Generation with a cache (core/train/sequence_decoder.h): >= 0 when a model
  // of one-token sequences computes the token at this position of each
  // sample's sequence; a layer that looks across positions (attention)
  // reads the earlier positions from its cache, and a position embedding
  // adds this position's row. -1 in training and evaluation.
  int64_t decode_position = -1;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string type() const = 0;
  // How many inputs the layer takes, or kAnyInputs: two or more (add, concat).
  static constexpr int kAnyInputs = -1;
  virtual int numInputs() const { return 1; }

  // Per-sample input shapes (no batch extent) -> per-sample output shape.
  // Throws ShapeError whose message names the layer and the expectation.
  virtual Shape setup(const std::vector<Shape>& inputs) = 0;
  // Trainable tensors, valid after setup(). Empty for parameter-free layers.
  virtual std::vector<ParamSpec> paramSpecs() const { return {}; }
  // Views into the flat buffers, in paramSpecs() order.
  virtual void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {}
  // Weight tying (a language model's output layer reading the token
  // embedding's table): the name of the layer whose first parameter this
  // layer uses as its weight, of shape tiedShape(); "" = none. That parameter
  // stays the other layer's (one entry in the store, saved once); both
  // layers add their gradients into its one gradient.
  virtual std::string tiedLayer() const { return ""; }
  virtual Shape tiedShape() const { return Shape{}; }
  // Views of that parameter and its gradient, after bind().
  virtual void bindTied(const Tensor& weight, const Tensor& grad) {}
  // State that is not trained but saved in checkpoints and shared by all
  // replicas like the parameters (batch norm's running statistics): declared
  // after setup(), bound to views of the model's buffer store. Training passes
  // update it from replica 0 only (LayerContext::updates_buffers).
  virtual std::vector<ParamSpec> bufferSpecs() const { return {}; }
  virtual void bindBuffers(const std::vector<Tensor>& buffers) {}

  // in[i]: [N, ...input shape i]; out: [N, ...output shape], preallocated.
  virtual void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) = 0;
  // dout: gradient of the loss w.r.t. out. din[i] is null when input i needs no
  // gradient (the network input); otherwise it is overwritten.
  virtual void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                        const std::vector<Tensor*>& din, const LayerContext& ctx) = 0;
  // Whether backward computes its input and its parameter gradients in
  // separate calls when asked (LayerContext::backward_part); the two add up
  // to one All call.
  virtual bool splitsBackward() const { return false; }

  // Optional fusion, called after setup() and before bind(): the model may ask
  // a layer to apply the element-wise activation layer of type `type` (e.g.
  // "relu") that reads only its output, and then drop that layer. Returns true
  // when the layer accepted: from then on its `out` holds activated values
  // (in forward and backward) and its backward applies the activation's
  // gradient itself. Saves the activation's memory passes. Default: declines.
  virtual bool fuseActivation(const std::string& type) { return false; }

  // Multiply-adds count twice; per sample; valid after setup() (and after a
  // fuseActivation, which adds the activation's element ops).
  virtual int64_t forwardFlops() const { return 0; }
  // What the layer computes between its 16-bit inputs and outputs when the
  // model runs in bf16 or fp16 (core/nn/precision.h). A Product layer's
  // parameters are rounded to 16 bits for each pass by the model (the layer
  // reads them through its bound views as usual).
  virtual SixteenBitRole sixteenBitRole() const { return SixteenBitRole::Elementwise; }
  // Whether its input holds token ids (whole floats) rather than values: a
  // 16-bit model leaves a network input that only such layers read in fp32,
  // where every id below 2^24 is exact (bf16 holds whole numbers to 256 only).
  virtual bool readsTokenIds() const { return false; }

  // One-line description of the configuration for the model summary ("3x3/1 pad 1").
  virtual std::string describe() const { return ""; }
  // The algorithm computing a batch of `batch` samples, when the layer has a
  // choice ("winograd4x4"; on a GPU the library's algorithms per pass); "" otherwise.
  virtual std::string algorithmName(int64_t batch) const { return ""; }

 private:
  std::string name_;
};

}  // namespace dtrain
