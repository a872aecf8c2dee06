// Between a training run and a checkpoint directory: which tensors go into
// model.safetensors (the parameters, then the buffers such as batch norm's
// running statistics, by name) and optimizer.safetensors
// ("<state>.<parameter>"), and how they are put back, with every name and
// shape checked so a checkpoint of another model is refused clearly.
#pragma once
#include <string>

#include "core/config/job_config.h"
#include "core/nn/param_store.h"
#include "core/optim/optimizer.h"
#include "core/train/checkpoint.h"
#include "core/train/train_state.h"

namespace dtrain {

// Writes RUN_DIR/checkpoints/step-XXXXXXXX and returns its path. The
// optimizer state is `optimizer`'s, or, when `streamed_state` is given,
// those tensors (a sharded run's, streamed from its workers).
std::string saveCheckpoint(const JobConfig& job, const TrainState& state, const ParamStore& store,
                           const ParamStore& buffers, Optimizer& optimizer,
                           const std::vector<NamedTensorView>* streamed_state = nullptr);

// Loads the weights into `store` and `buffers` (and the optimizer state, when given).
void restoreCheckpoint(const LoadedCheckpoint& ckpt, ParamStore& store, ParamStore& buffers,
                       Optimizer* optimizer);

}  // namespace dtrain
