#include "strategies/pipeline/stage_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/backend/device_memory.h"
#include "core/backend/ops.h"
#include "core/errors.h"
#include "strategies/pipeline/schedule_check.h"

namespace dtrain::pipeline {

namespace {

// Each direction its own ordered channel between two stages.
uint32_t tagOf(Direction d) { return static_cast<uint32_t>(d); }

}  // namespace

std::vector<CrossingTensor> crossingTensors(const Model& whole, const std::vector<LayerSpec>& specs,
                                            const std::vector<int>& stage_of, int cut) {
  const std::vector<LayerCost> layers = layerCosts(whole, specs);
  std::vector<bool> crosses(layers.size(), false);
  for (size_t j = 0; j < layers.size(); ++j) {
    if (stage_of[j] <= cut) continue;
    for (int i : layers[j].inputs)
      if (i >= 0 && stage_of[static_cast<size_t>(i)] <= cut) crosses[static_cast<size_t>(i)] = true;
  }
  std::vector<CrossingTensor> out;
  for (size_t i = 0; i < layers.size(); ++i)
    if (crosses[i]) out.push_back({layers[i].name, whole.nodes()[i].out_shape});
  return out;
}

StageWorker::StageWorker(const Model& whole, const std::vector<LayerSpec>& specs,
                         const std::vector<int>& stage_of, const Schedule& schedule, int stage,
                         int64_t max_micro_batch, int64_t classes, const LayerRegistry& registry,
                         const LayerDefaults& defaults, Device device, float label_smoothing)
    : stage_(stage),
      stages_(schedule.config.stages),
      micro_batches_(schedule.config.micro_batches),
      classes_(classes),
      device_(device),
      label_smoothing_(label_smoothing),
      actions_(schedule.stages.at(static_cast<size_t>(stage))),
      part_(stagePart(whole, specs, stage_of, stage)),
      max_rows_(max_micro_batch) {
  out_names_ = part_.cut.outputs;
  out_names_.push_back(part_.specs.back().name);
  if (stage > 0) in_cut_ = crossingTensors(whole, specs, stage_of, stage - 1);
  if (stage + 1 < stages_) out_cut_ = crossingTensors(whole, specs, stage_of, stage);
  // One model per micro-batch whose activations the stage holds at once.
  const ScheduleReport report = checkSchedule(schedule);
  const int copies = std::max(1, report.peak_in_flight.at(static_cast<size_t>(stage)));
  for (int c = 0; c < copies; ++c)
    models_.push_back(std::make_unique<Model>(part_.specs, part_.cut, registry, defaults));
  for (auto& model : models_) model->setPrecision(whole.precision());  // the run's arithmetic
  models_[0]->registerParams(store_);
  store_.allocate(device);
  models_[0]->registerBuffers(buffers_);
  buffers_.allocate(device);
  if (!device.isCpu() && stage + 1 == stages_) {
    // A per-position model's rows: [T, width] a sample (DeviceLoss::make).
    const Shape& out = models_[0]->outputShape();
    const int64_t width = out[out.rank() - 1];
    loss_ = DeviceLoss::make(device, classes, out.numel() != width || width != classes ? width : 0);
  }
  grads_ = store_.gradBuffer();
  for (auto& model : models_)
    model->bind(store_, grads_, max_micro_batch, buffers_.size() > 0 ? &buffers_ : nullptr);
  busy_.assign(models_.size(), false);
}

StageWorker::~StageWorker() = default;

int64_t StageWorker::activationBytes() const {
  int64_t bytes = 0;
  for (const auto& model : models_) bytes += model->activationBytes();
  return bytes;
}

int64_t StageWorker::stepBytes(const std::vector<CrossingTensor>& bundle) const {
  int64_t per_micro_batch = 0;
  for (const CrossingTensor& t : bundle)
    per_micro_batch += static_cast<int64_t>(kStageMessageBytes) +
                       t.shape.numel() * max_rows_ * static_cast<int64_t>(sizeof(float));
  return per_micro_batch * micro_batches_;
}

std::pair<int64_t, int64_t> StageWorker::rows(int m) const {
  const int64_t n = batch_->size;
  if (evaluating_) return {std::min(n, m * max_rows_), std::min(n, (m + 1) * max_rows_)};
  return {n * m / micro_batches_, n * (m + 1) / micro_batches_};
}

BatchFigures StageWorker::step(const Batch& batch, int64_t step, uint64_t seed, float grad_scale,
                               StageLink& link, const std::function<void(Op)>& collective) {
  batch_ = &batch;
  step_ = step;
  seed_ = seed;
  grad_scale_ = grad_scale;
  link_ = &link;
  figures_ = BatchFigures{};
  busy_s_ = 0;
  for (const Action& a : actions_) {
    // A slice smaller than the micro-batch count leaves some empty: every
    // stage of the replica sees the same slice, so all of them skip those.
    if (a.micro_batch >= 0) {
      const auto [begin, end] = rows(a.micro_batch);
      if (begin == end) continue;
    }
    const int m = a.micro_batch;
    switch (a.op) {
      case Op::Forward:
      case Op::Backward:
      case Op::BackwardInputs:
      case Op::BackwardWeights: {
        const auto t0 = std::chrono::steady_clock::now();
        if (a.op == Op::Forward)
          forward(m);
        else
          backward(m, a.op == Op::Backward         ? BackwardPart::All
                      : a.op == Op::BackwardInputs ? BackwardPart::Inputs
                                                   : BackwardPart::Params);
        busy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        break;
      }
      case Op::SendActivation:
        send(Direction::Activation, m, a.peer, out_cut_, sent_on_.at(m));
        sent_on_.erase(m);
        break;
      case Op::RecvActivation:
        received_[m] = receive(Direction::Activation, m, a.peer, in_cut_);
        break;
      case Op::SendGradient:
        send(Direction::Gradient, m, a.peer, in_cut_, gradients_out_.at(m));
        gradients_out_.erase(m);
        break;
      case Op::RecvGradient:
        gradients_in_[m] = receive(Direction::Gradient, m, a.peer, out_cut_);
        break;
      case Op::AllReduce:
      case Op::Update:
        collective(a.op);
        break;
    }
  }
  // Every send handed over before the buffers go.
  link.waitSends();
  if (loss_) {
    // The step's loss, queued on the GPU micro-batch by micro-batch: one wait.
    const LossSums sums = loss_->read();
    figures_ = BatchFigures{sums.loss_sum, sums.correct, sums.samples};
  }
  outbox_.clear();
  device_outbox_.clear();
  images_.clear();
  received_.clear();
  gradients_in_.clear();
  dlogits_.clear();
  return figures_;
}

void StageWorker::forward(int m) {
  const auto free = std::find(busy_.begin(), busy_.end(), false);
  if (free == busy_.end())
    throw Error("pipeline: stage " + std::to_string(stage_) + " holds too many micro-batches");
  *free = true;
  const auto copy = static_cast<size_t>(free - busy_.begin());
  model_of_[m] = copy;
  const auto [begin, end] = rows(m);
  const std::vector<const Tensor*> inputs = inputsOf(m);
  LayerContext ctx;
  ctx.seed = seed_;
  ctx.sample_offset = batch_->global_offset + begin;  // dropout masks follow the global row
  ctx.updates_buffers = true;
  Model& model = *models_[copy];
  model.forward(inputs, ctx);
  const std::vector<const Tensor*> out = model.outputs();
  if (stage_ + 1 < stages_) {
    sent_on_[m] = onward(m, out);
    return;
  }
  // The last stage: the micro-batch's loss, scaled as the whole batch's.
  const Tensor& logits = *out.back();
  Tensor dlogits = Tensor::empty(logits.shape(), device_);
  addLoss(logits, m, grad_scale_, dlogits.data(), label_smoothing_);
  dlogits_[m] = dlogits;
}

std::vector<const Tensor*> StageWorker::inputsOf(int m) {
  std::vector<const Tensor*> inputs;
  for (const ModelCut::Input& in : part_.cut.inputs)
    inputs.push_back(in.name == "input" ? &images(m) : &received_.at(m).at(in.name));
  return inputs;
}

void StageWorker::addLoss(const Tensor& logits, int m, float grad_scale, float* dlogits, float smoothing) {
  const auto [begin, end] = rows(m);
  // A per-position model's output is [T, width] a sample (width: the
  // vocabulary, perhaps padded): each position a row of the loss, as in
  // ReplicaSet::runSlice, the gradient the mean over the global batch's
  // counted labels (padding left out).
  const int64_t width = logits.shape()[logits.shape().rank() - 1];
  const int64_t per_sample = end > begin ? logits.numel() / ((end - begin) * width) : 1;
  const bool tokens = per_sample != 1 || width != classes_;
  const int32_t* labels = batch_->labels.data() + begin * per_sample;
  const float scale = tokens ? perLabelScale(*batch_, grad_scale) : grad_scale;
  if (loss_) {  // on the GPU, read at the step's (or the evaluation batch's) end
    loss_->queue(logits.data(), labels, (end - begin) * per_sample, scale, dlogits, smoothing);
    return;
  }
  int64_t correct = 0;
  if (!tokens) {
    figures_.loss_sum += ops::softmaxCrossEntropy(logits.data(), labels, end - begin, classes_, scale,
                                                  dlogits, &correct, smoothing);
    figures_.correct += correct;
    figures_.samples += end - begin;
    return;
  }
  int64_t counted = 0;
  figures_.loss_sum += ops::tokenCrossEntropy(logits.data(), labels, (end - begin) * per_sample, width,
                                              classes_, scale, dlogits, &correct, &counted, smoothing);
  figures_.correct += correct;
  figures_.samples += counted;
}

StageWorker::Bundle StageWorker::onward(int m, const std::vector<const Tensor*>& out) const {
  Bundle next;
  for (const CrossingTensor& t : out_cut_) {
    const auto mine = std::find(out_names_.begin(), out_names_.end(), t.name);
    next[t.name] = mine != out_names_.end() ? *out[static_cast<size_t>(mine - out_names_.begin())]
                                            : received_.at(m).at(t.name);
  }
  return next;
}

BatchFigures StageWorker::evaluate(const Batch& batch, int64_t evaluation, StageLink& link) {
  batch_ = &batch;
  step_ = -evaluation;
  link_ = &link;
  figures_ = BatchFigures{};
  evaluating_ = true;
  Model& model = *models_.front();  // one piece at a time: its results are sent before the next
  const int64_t pieces = (batch.size + max_rows_ - 1) / max_rows_;
  for (int m = 0; m < static_cast<int>(pieces); ++m) {
    const auto [begin, end] = rows(m);
    if (stage_ > 0) received_[m] = receive(Direction::Activation, m, stage_ - 1, in_cut_);
    const std::vector<const Tensor*> inputs = inputsOf(m);
    LayerContext ctx;
    ctx.training = false;
    ctx.updates_buffers = false;
    ctx.sample_offset = batch.global_offset + begin;
    model.forward(inputs, ctx);
    const std::vector<const Tensor*> out = model.outputs();
    if (stage_ + 1 < stages_) {
      send(Direction::Activation, m, stage_ + 1, out_cut_, onward(m, out));
      link.waitSends();
      outbox_.clear();
      device_outbox_.clear();
    } else {
      addLoss(*out.back(), m, 0.0f, nullptr, 0.0f);  // no gradient, no smoothing
    }
    images_.erase(m);
    received_.erase(m);
  }
  evaluating_ = false;
  if (loss_) {
    const LossSums sums = loss_->read();
    figures_ = BatchFigures{sums.loss_sum, sums.correct, sums.samples};
  }
  return figures_;
}

void StageWorker::backward(int m, BackwardPart part) {
  const size_t copy = model_of_.at(m);
  const auto [begin, end] = rows(m);
  const std::vector<const Tensor*> inputs = inputsOf(m);
  LayerContext ctx;
  ctx.seed = seed_;
  ctx.sample_offset = batch_->global_offset + begin;
  ctx.backward_part = part;
  if (part == BackwardPart::Params) {  // the weight gradients from what the first pass left
    models_[copy]->backward(inputs, {}, {}, ctx);
    release(m);
    return;
  }
  std::vector<Tensor> dinputs;
  std::vector<Tensor*> din_ptrs;
  const std::vector<ModelCut::Input>& cut_inputs = part_.cut.inputs;
  dinputs.reserve(cut_inputs.size());
  for (const ModelCut::Input& in : cut_inputs) {
    dinputs.push_back(Tensor::empty(in.shape.withBatch(end - begin), device_));
    din_ptrs.push_back(in.needs_gradient ? &dinputs.back() : nullptr);
  }
  std::vector<const Tensor*> douts;
  std::vector<Tensor> zeros;  // results no later stage sends a gradient for
  zeros.reserve(out_names_.size());
  const std::vector<const Tensor*> out = models_[copy]->outputs();
  const Bundle* later = gradients_in_.count(m) ? &gradients_in_.at(m) : nullptr;
  for (size_t j = 0; j < out_names_.size(); ++j) {
    if (stage_ + 1 == stages_ && j + 1 == out_names_.size()) {
      douts.push_back(&dlogits_.at(m));
    } else if (later && later->count(out_names_[j])) {
      douts.push_back(&later->at(out_names_[j]));
    } else {
      zeros.push_back(Tensor::zeros(out[j]->shape(), device_));
      douts.push_back(&zeros.back());
    }
  }
  models_[copy]->backward(inputs, douts, din_ptrs, ctx);
  if (stage_ > 0) {
    // Back to the stage before: the gradient of each tensor that crossed in,
    // from this stage's layers and from the stages it was passed on to.
    Bundle& back = gradients_out_[m];
    for (const CrossingTensor& t : in_cut_) {
      Tensor g = Tensor::zeros(t.shape.withBatch(end - begin), device_);
      for (size_t j = 0; j < cut_inputs.size(); ++j)
        if (cut_inputs[j].name == t.name && din_ptrs[j]) g.add(dinputs[j]);
      if (later && later->count(t.name)) g.add(later->at(t.name));
      back[t.name] = g;
    }
  }
  gradients_in_.erase(m);
  dlogits_.erase(m);
  // A split backward's weight gradients read the copy and the inputs still.
  if (part == BackwardPart::All) release(m);
}

void StageWorker::release(int m) {
  busy_[model_of_.at(m)] = false;
  model_of_.erase(m);
  images_.erase(m);
  received_.erase(m);
}

const Tensor& StageWorker::images(int m) {
  auto it = images_.find(m);
  if (it == images_.end()) {
    const auto [begin, end] = rows(m);
    it = images_.emplace(m, batch_->images.narrow(begin, end - begin).to(device_)).first;
  }
  return it->second;
}

std::string StageWorker::stageName(int stage) const {
  return static_cast<size_t>(stage) < stage_names_.size() ? stage_names_[static_cast<size_t>(stage)]
                                                          : "stage " + std::to_string(stage);
}

template <typename Transfer>
void StageWorker::transfer(const StageMessage& what, int peer, Transfer&& run) {
  try {
    run();
  } catch (const CommError& e) {
    throw CommError("pipeline " + stageName(stage_) + ": " + what.describe() + " with " + stageName(peer) +
                    " failed: " + e.what());
  }
}

void StageWorker::send(Direction d, int m, int to, const std::vector<CrossingTensor>& what,
                       const Bundle& from) {
  const auto [begin, end] = rows(m);
  for (const CrossingTensor& t : what) {
    const Tensor& values = from.at(t.name);
    StageMessage header{d, stage_, to, step_, m, t.name, t.shape.withBatch(end - begin)};
    if (values.numel() != header.shape.numel())
      throw Error("pipeline: stage " + std::to_string(stage_) + " holds " + std::to_string(values.numel()) +
                  " floats for " + header.describe());
    outbox_.push_back(header.encode());
    const std::vector<uint8_t>& head = outbox_.back();
    transfer(header, to,
             [&] { link_->sendAsync(head.data(), static_cast<int64_t>(head.size()), to, tagOf(d)); });
    // Copied (out of the GPU, on one, unless the link takes device memory):
    // the tensor's memory is a model's, which the next micro-batch reuses.
    const size_t bytes = static_cast<size_t>(values.numel()) * sizeof(float);
    const void* body = nullptr;
    if (link_->takesDeviceMemory()) {  // an NCCL link: made for GPU stages only
      device_outbox_.push_back(Tensor::empty(values.shape(), device_));
      device_outbox_.back().copyFrom(values);
      body = device_outbox_.back().data();
    } else {
      outbox_.emplace_back(bytes);
      copyDeviceMemory(outbox_.back().data(), Device::cpu(), values.data(), values.device(), bytes);
      body = outbox_.back().data();
    }
    transfer(header, to, [&] { link_->sendAsync(body, static_cast<int64_t>(bytes), to, tagOf(d)); });
  }
}

StageWorker::Bundle StageWorker::receive(Direction d, int m, int from,
                                         const std::vector<CrossingTensor>& what) {
  const auto [begin, end] = rows(m);
  Bundle out;
  for (const CrossingTensor& t : what) {
    const StageMessage expected{d, from, stage_, step_, m, t.name, t.shape.withBatch(end - begin)};
    std::vector<uint8_t> bytes(kStageMessageBytes);
    transfer(expected, from,
             [&] { link_->recv(bytes.data(), static_cast<int64_t>(bytes.size()), from, tagOf(d)); });
    const StageMessage got = StageMessage::decode(bytes, "pipeline " + stageName(from));
    checkStageMessage(expected, got);
    // Into the GPU's memory directly when the link takes it, else through host memory.
    const bool in_place = link_->takesDeviceMemory();
    Tensor values = Tensor::empty(got.shape, in_place ? device_ : Device::cpu());
    transfer(expected, from, [&] {
      link_->recv(values.data(), values.numel() * static_cast<int64_t>(sizeof(float)), from, tagOf(d));
    });
    out[t.name] = values.to(device_);
  }
  return out;
}

}  // namespace dtrain::pipeline
