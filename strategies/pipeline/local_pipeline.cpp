#include "strategies/pipeline/local_pipeline.h"

#include <algorithm>

#include "core/backend/ops.h"
#include "core/errors.h"
#include "strategies/pipeline/schedule_check.h"

namespace dtrain::pipeline {

LocalPipeline::LocalPipeline(const Model& whole, const std::vector<LayerSpec>& specs,
                             const std::vector<int>& stage_of, const Schedule& schedule,
                             int64_t max_micro_batch, int64_t classes, const LayerRegistry& registry,
                             const LayerDefaults& defaults)
    : schedule_(schedule), classes_(classes), last_name_(whole.nodes().back().layer->name()) {
  const ScheduleReport report = checkSchedule(schedule_);
  order_ = report.order;
  for (int s = 0; s < schedule_.config.stages; ++s) {
    auto stage = std::make_unique<Stage>();
    stage->part = stagePart(whole, specs, stage_of, s);
    stage->out_names = stage->part.cut.outputs;
    stage->out_names.push_back(stage->part.specs.back().name);
    // One model per micro-batch whose activations the stage holds at once.
    const int copies = std::max(1, report.peak_in_flight[static_cast<size_t>(s)]);
    for (int c = 0; c < copies; ++c)
      stage->models.push_back(
          std::make_unique<Model>(stage->part.specs, stage->part.cut, registry, defaults));
    for (auto& model : stage->models) model->setPrecision(whole.precision());  // the run's arithmetic
    stage->models[0]->registerParams(stage->store);
    stage->store.allocate();
    stage->models[0]->registerBuffers(stage->buffers);
    stage->buffers.allocate();
    stage->grads = stage->store.gradBuffer();
    for (auto& model : stage->models)
      model->bind(stage->store, stage->grads, max_micro_batch,
                  stage->buffers.size() > 0 ? &stage->buffers : nullptr);
    stage->busy.assign(stage->models.size(), false);
    stages_.push_back(std::move(stage));
  }
}

std::pair<int64_t, int64_t> LocalPipeline::rows(int m, int64_t n) const {
  const int64_t parts = schedule_.config.micro_batches;
  return {n * m / parts, n * (m + 1) / parts};
}

BatchFigures LocalPipeline::step(const Batch& batch, uint64_t seed, float grad_scale) {
  sent_.clear();
  returned_.clear();
  dlogits_.clear();
  BatchFigures figures;
  // In the order the schedule's check ran the lists: every receive finds its
  // message sent (the check matched each send to its receive).
  for (const auto& [s, at] : order_) {
    const Action& a = schedule_.stages[static_cast<size_t>(s)][at];
    if (a.op == Op::Forward)
      forward(s, a.micro_batch, batch, seed, grad_scale, figures);
    else if (a.op == Op::Backward)
      backward(s, a.micro_batch, batch, seed, BackwardPart::All);
    else if (a.op == Op::BackwardInputs)
      backward(s, a.micro_batch, batch, seed, BackwardPart::Inputs);
    else if (a.op == Op::BackwardWeights)
      backward(s, a.micro_batch, batch, seed, BackwardPart::Params);
    // Sends and receives move nothing here (the results stay in sent_ and
    // returned_); AllReduce (one replica here) and Update (the caller's) do nothing.
  }
  return figures;
}

std::vector<const Tensor*> LocalPipeline::inputsOf(const Stage& stage, int m, const Tensor& images) const {
  std::vector<const Tensor*> inputs;
  for (const ModelCut::Input& in : stage.part.cut.inputs)
    inputs.push_back(in.name == "input" ? &images : &sent_.at({m, in.name}));
  return inputs;
}

void LocalPipeline::forward(int s, int m, const Batch& batch, uint64_t seed, float grad_scale,
                            BatchFigures& figures) {
  Stage& stage = *stages_[static_cast<size_t>(s)];
  const auto free = std::find(stage.busy.begin(), stage.busy.end(), false);
  if (free == stage.busy.end())
    throw Error("pipeline: stage " + std::to_string(s) + " holds too many micro-batches");
  *free = true;
  const auto copy = static_cast<size_t>(free - stage.busy.begin());
  stage.model_of[m] = copy;
  const auto [begin, end] = rows(m, batch.size);
  const Tensor images = batch.images.narrow(begin, end - begin);
  const std::vector<const Tensor*> inputs = inputsOf(stage, m, images);
  LayerContext ctx;
  ctx.seed = seed;
  ctx.sample_offset = batch.global_offset + begin;  // dropout masks follow the global row
  ctx.updates_buffers = true;
  Model& model = *stage.models[copy];
  model.forward(inputs, ctx);
  const std::vector<const Tensor*> out = model.outputs();
  for (size_t j = 0; j < out.size(); ++j) sent_[{m, stage.out_names[j]}] = *out[j];
  if (s + 1 < stages()) return;
  // The last stage: the loss of the micro-batch, scaled as the whole batch's.
  const Tensor& logits = *out.back();
  Tensor dlogits = Tensor::empty(logits.shape());
  int64_t correct = 0;
  figures.loss_sum += ops::softmaxCrossEntropy(logits.data(), batch.labels.data() + begin, end - begin,
                                               classes_, grad_scale, dlogits.data(), &correct);
  figures.correct += correct;
  figures.samples += end - begin;
  dlogits_[m] = dlogits;
}

void LocalPipeline::backward(int s, int m, const Batch& batch, uint64_t seed, BackwardPart part) {
  Stage& stage = *stages_[static_cast<size_t>(s)];
  const size_t copy = stage.model_of.at(m);
  const auto [begin, end] = rows(m, batch.size);
  const Tensor images = batch.images.narrow(begin, end - begin);
  LayerContext ctx;
  ctx.seed = seed;
  ctx.sample_offset = batch.global_offset + begin;
  ctx.backward_part = part;
  const std::vector<const Tensor*> inputs = inputsOf(stage, m, images);
  if (part == BackwardPart::Params) {  // the weight gradients from what the first pass left
    stage.models[copy]->backward(inputs, {}, {}, ctx);
    stage.busy[copy] = false;
    stage.model_of.erase(m);
    return;
  }
  std::vector<Tensor> dinputs;
  std::vector<Tensor*> din_ptrs;
  const std::vector<ModelCut::Input>& cut_inputs = stage.part.cut.inputs;
  dinputs.reserve(cut_inputs.size());
  for (const ModelCut::Input& in : cut_inputs) {
    dinputs.push_back(Tensor::empty(in.shape.withBatch(end - begin)));
    din_ptrs.push_back(in.needs_gradient ? &dinputs.back() : nullptr);
  }
  std::vector<const Tensor*> douts;
  std::vector<Tensor> zeros;  // for results no later stage sends a gradient for (none leads to a parameter)
  zeros.reserve(stage.out_names.size());
  const std::vector<const Tensor*> out = stage.models[copy]->outputs();
  for (size_t j = 0; j < stage.out_names.size(); ++j) {
    const std::string& name = stage.out_names[j];
    if (name == last_name_ && s + 1 == stages()) {
      douts.push_back(&dlogits_.at(m));
    } else if (auto it = returned_.find({m, name}); it != returned_.end()) {
      douts.push_back(&it->second);
    } else {
      zeros.push_back(Tensor::empty(out[j]->shape()));
      zeros.back().zero();
      douts.push_back(&zeros.back());
    }
  }
  stage.models[copy]->backward(inputs, douts, din_ptrs, ctx);
  // What it sends back, summed with what other stages sent for the same result.
  for (size_t j = 0; j < cut_inputs.size(); ++j) {
    if (!din_ptrs[j]) continue;
    auto [it, fresh] = returned_.try_emplace({m, cut_inputs[j].name}, dinputs[j]);
    if (!fresh) it->second.add(dinputs[j]);
  }
  if (part == BackwardPart::Inputs) return;  // the copy's activations wait for the weight gradients
  stage.busy[copy] = false;
  stage.model_of.erase(m);
}

}  // namespace dtrain::pipeline
