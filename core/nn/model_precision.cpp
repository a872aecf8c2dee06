// Model's precision (core/nn/precision.h): which parameters the layers read
// in a 16-bit precision, the rounding of the CPU's reference path, and on a
// GPU the conversions at the model's edges between the callers' floats and
// the layers' 16-bit tensors.
#include <algorithm>

#include "core/backend/device_memory.h"
#include "core/errors.h"
#include "core/nn/model.h"

namespace dtrain {

bool Model::deviceIn16Bits() const {
  return isSixteenBit(precision_) && store_ && !bound_grads_.device().isCpu();
}

DType Model::activationDType() const {
  if (!deviceIn16Bits()) return DType::F32;
  return precision_ == Precision::Fp16 ? DType::F16 : DType::BF16;
}

void Model::bindParams() {
  const ParamStore& store = *store_;
  const bool sixteen = isSixteenBit(precision_);
  const bool on_device = deviceIn16Bits();
  const int64_t size = std::max<int64_t>(store.size(), 1);
  rounded_ranges_.clear();
  rounded_params_ = sixteen && !on_device ? Tensor::zeros(Shape{size}) : Tensor();
  half_params_ = on_device ? Tensor::zeros(Shape{size}, bound_grads_.device(), activationDType()) : Tensor();
  half_params_current_ = false;
  const Tensor& rounded_copy = on_device ? half_params_ : rounded_params_;
  size_t entry = 0;
  std::vector<size_t> first_entry(nodes_.size(), 0);
  for (Node& n : nodes_) {
    first_entry[static_cast<size_t>(&n - nodes_.data())] = entry;
    const bool rounded = sixteen && n.layer->sixteenBitRole() == SixteenBitRole::Product;
    std::vector<Tensor> params, param_grads;
    for (const ParamSpec& spec : n.layer->paramSpecs()) {
      const ParamEntry& e = store.entries().at(entry);
      if (e.name != n.layer->name() + "." + spec.name || e.shape != spec.shape)
        throw Error("parameter layout mismatch at " + e.name);
      params.push_back(store.view(rounded ? rounded_copy : store.params(), entry));
      param_grads.push_back(store.view(bound_grads_, entry));
      if (rounded && !on_device) rounded_ranges_.emplace_back(e.offset, e.shape.numel());
      ++entry;
    }
    n.layer->bind(params, param_grads);
  }
  // A tied weight is its owner's parameter, read as the owner reads it
  // (rounded when the owner's is) and summing both layers' gradients.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (tied_to_[i] < 0) continue;
    const auto owner = static_cast<size_t>(tied_to_[i]);
    const bool rounded = sixteen && nodes_[owner].layer->sixteenBitRole() == SixteenBitRole::Product;
    nodes_[i].layer->bindTied(store.view(rounded ? rounded_copy : store.params(), first_entry[owner]),
                              store.view(bound_grads_, first_entry[owner]));
  }
}

void Model::setPrecision(Precision precision) {
  const DType before = activationDType();
  precision_ = precision;
  if (!store_) return;
  bindParams();
  if (activationDType() != before) allocateActivations();
}

void Model::roundIn16Bits(Tensor& t) const {
  if (isSixteenBit(precision_) && t.dtype() == DType::F32 && t.device().isCpu())
    ops::roundTo16Bits(halfFormatOf(precision_), t.data(), t.data(), t.numel());
}

void Model::assignConverted(Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype()) {
    dst.copyFrom(src);
    return;
  }
  if (dst.numel() != src.numel())
    throw ShapeError("conversion of " + src.shape().str() + " into " + dst.shape().str());
  if (!(dst.device() == src.device()) || dst.device().isCpu())
    throw Error(std::string("a model converts between ") + dtypeName(src.dtype()) + " and " +
                dtypeName(dst.dtype()) + " on one GPU only (given " + src.device().str() + " and " +
                dst.device().str() + ")");
  convertDeviceMemory(src.raw(), src.dtype(), dst.raw(), dst.dtype(), dst.numel(), dst.device());
}

bool Model::readsOnlyTokenIds(size_t k) const {
  bool read = false;
  for (const Node& node : nodes_)
    for (int in : node.inputs)
      if (in == -1 - static_cast<int>(k)) {
        if (!node.layer->readsTokenIds()) return false;
        read = true;
      }
  return read;
}

const std::vector<const Tensor*>& Model::readableInputs(const std::vector<const Tensor*>& inputs,
                                                        bool round) {
  if (inputs.size() != cut_inputs_.size())
    throw Error("a model part of " + std::to_string(cut_inputs_.size()) + " inputs was given " +
                std::to_string(inputs.size()));
  readable_inputs_ = inputs;
  if (!isSixteenBit(precision_)) return readable_inputs_;
  const bool on_device = deviceIn16Bits();
  const DType dtype = on_device ? activationDType() : DType::F32;
  const Device device = on_device ? bound_grads_.device() : Device::cpu();
  rounded_input_storage_.resize(cut_inputs_.size());
  rounded_inputs_.resize(cut_inputs_.size());
  for (size_t k = 0; k < cut_inputs_.size(); ++k) {
    // On the CPU, results of earlier parts arrive rounded already and the
    // network's input is rounded here, as a 16-bit path would store it. On
    // a GPU the layers read 16-bit tensors: every float input is converted
    // (exactly, for an earlier part's results, which hold 16-bit values).
    if (!on_device && cut_inputs_[k].name != "input") continue;
    if (readsOnlyTokenIds(k)) continue;  // ids stay exact in fp32
    const Tensor& in = *inputs[k];
    if (on_device && in.dtype() == dtype) continue;
    Tensor& storage = rounded_input_storage_[k];
    if (storage.numel() < in.numel() || storage.dtype() != dtype || !(storage.device() == device))
      storage = Tensor::empty(Shape{in.numel()}, device, dtype);
    rounded_inputs_[k] = storage.narrow(0, in.numel()).reshape(in.shape());
    if (round) {
      if (on_device)
        assignConverted(rounded_inputs_[k], in);
      else
        ops::roundTo16Bits(halfFormatOf(precision_), in.data(), rounded_inputs_[k].data(), in.numel());
    }
    readable_inputs_[k] = &rounded_inputs_[k];
  }
  return readable_inputs_;
}

void Model::castParamsTo16Bits() {
  if (half_params_.defined() && store_->size() > 0) {
    // The GPU's copy, unless the update that computed these masters wrote it.
    if (!half_params_current_)
      convertDeviceMemory(store_->params().raw(), DType::F32, half_params_.raw(), half_params_.dtype(),
                          store_->size(), half_params_.device());
    half_params_current_ = false;
    return;
  }
  if (rounded_ranges_.empty()) return;
  // The weights this pass multiplies with, as a 16-bit path casts them
  // once per step: the current fp32 masters, rounded.
  const float* master = store_->params().data();
  float* rounded = rounded_params_.data();
  for (const auto& [offset, count] : rounded_ranges_)
    ops::roundTo16Bits(halfFormatOf(precision_), master + offset, rounded + offset, count);
}

void Model::resultsInFloats(int64_t n) {
  if (!deviceIn16Bits()) {
    outputs_in_floats_.clear();
    return;
  }
  outputs_in_floats_storage_.resize(outputs_.size());
  outputs_in_floats_.resize(outputs_.size());
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const Tensor& result = act_[static_cast<size_t>(outputs_[k])];
    Tensor& storage = outputs_in_floats_storage_[k];
    const int64_t full = act_storage_[static_cast<size_t>(outputs_[k])].numel();
    if (storage.numel() < full) storage = Tensor::empty(Shape{full}, result.device());
    outputs_in_floats_[k] = storage.narrow(0, result.numel()).reshape(result.shape());
    assignConverted(outputs_in_floats_[k], result);
  }
}

Tensor* Model::inputGradientTarget(size_t k, Tensor& given) {
  if (!deviceIn16Bits() || given.dtype() == activationDType()) return &given;
  // Sized once, before any pointer into it is handed out in this pass.
  if (input_grads_.size() != cut_inputs_.size()) {
    input_grad_storage_.resize(cut_inputs_.size());
    input_grads_.resize(cut_inputs_.size());
  }
  Tensor& storage = input_grad_storage_[k];
  if (storage.numel() < given.numel() || storage.dtype() != activationDType())
    storage = Tensor::empty(Shape{given.numel()}, bound_grads_.device(), activationDType());
  input_grads_[k] = storage.narrow(0, given.numel()).reshape(given.shape());
  return &input_grads_[k];
}

void Model::inputGradientsInFloats(const std::vector<Tensor*>& dinputs, const std::vector<int>& written) {
  if (!deviceIn16Bits()) return;
  for (size_t k = 0; k < dinputs.size(); ++k)
    if (written[k] > 0 && dinputs[k] && dinputs[k]->dtype() != activationDType())
      assignConverted(*dinputs[k], input_grads_[k]);
}

}  // namespace dtrain
