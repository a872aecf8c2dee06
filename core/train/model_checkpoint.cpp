#include "core/train/model_checkpoint.h"

#include "core/errors.h"

namespace dtrain {

std::string saveCheckpoint(const JobConfig& job, const TrainState& state, const ParamStore& store,
                           const ParamStore& buffers, Optimizer& optimizer,
                           const std::vector<NamedTensorView>* streamed_state) {
  CheckpointContents c;
  // Buffers on a GPU are written from host copies (kept alive until written).
  const Tensor params = store.params().to(Device::cpu());
  for (const ParamEntry& e : store.entries())
    c.weights.push_back({e.name, e.shape, params.data() + e.offset});
  const Tensor buffer_values = buffers.size() > 0 ? buffers.params().to(Device::cpu()) : Tensor();
  for (const ParamEntry& e : buffers.entries())
    c.weights.push_back({e.name, e.shape, buffer_values.data() + e.offset});
  std::vector<Tensor> host_state;
  auto state_buffers = optimizer.stateBuffers();
  if (streamed_state) {
    c.optimizer = *streamed_state;
    state_buffers.clear();
  }
  for (auto& [buffer, tensor] : state_buffers) {
    host_state.push_back(tensor->to(Device::cpu()));
    for (const ParamEntry& e : store.entries())
      c.optimizer.push_back({buffer + "." + e.name, e.shape, host_state.back().data() + e.offset});
  }
  c.metadata["format"] = "dtrain";
  c.metadata["job"] = job.job.name;
  c.metadata["step"] = std::to_string(state.step);
  c.state_toml = trainStateToToml(state, job);
  return writeCheckpoint(job.job.run_dir, state.step, c, job.train.keep_last);
}

namespace {

void copyTensor(const SafetensorsFile& file, const std::string& file_name, const std::string& name,
                const Shape& shape, float* dst) {
  const SafetensorsTensor* t = file.find(name);
  if (!t)
    throw CheckpointError(file_name + " has no tensor '" + name +
                          "'; the checkpoint belongs to a different model than the job describes");
  if (t->shape != shape)
    throw CheckpointError(file_name + ": tensor '" + name + "' has shape " + t->shape.str() +
                          ", the model expects " + shape.str());
  std::copy(t->data.begin(), t->data.end(), dst);
}

}  // namespace

void restoreCheckpoint(const LoadedCheckpoint& ckpt, ParamStore& store, ParamStore& buffers,
                       Optimizer* optimizer) {
  const std::string weights_file = ckpt.dir + "/model.safetensors";
  const size_t expected = store.entries().size() + buffers.entries().size();
  if (ckpt.weights.tensors.size() != expected)
    throw CheckpointError(weights_file + " holds " + std::to_string(ckpt.weights.tensors.size()) +
                          " tensors, the model has " + std::to_string(expected) +
                          "; the checkpoint belongs to a different model than the job describes");
  // Read into host memory, then copy to the buffer's device if it is a GPU.
  auto restore = [&](const ParamStore& layout, Tensor& target, const SafetensorsFile& file,
                     const std::string& file_name, const std::string& prefix) {
    if (layout.size() == 0) return;
    Tensor host = target.device().isCpu() ? target : Tensor::zeros(target.shape());
    for (const ParamEntry& e : layout.entries())
      copyTensor(file, file_name, prefix + e.name, e.shape, host.data() + e.offset);
    if (!target.device().isCpu()) target.copyFrom(host);
  };
  restore(store, store.params(), ckpt.weights, weights_file, "");
  restore(buffers, buffers.params(), ckpt.weights, weights_file, "");
  if (!optimizer) return;
  const std::string opt_file = ckpt.dir + "/optimizer.safetensors";
  for (auto& [buffer, tensor] : optimizer->stateBuffers())
    restore(store, *tensor, ckpt.optimizer, opt_file, buffer + ".");
}

}  // namespace dtrain
