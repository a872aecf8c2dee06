// The job's choice of the tensors AdamW decays, as ranges of a parameter
// store's flat layout (core/optim/decay_mask.h): matrices always; 1-D tensors
// (biases, normalisation scales and shifts) with [optimizer] decay_1d;
// embedding tables (ParamSpec::embedding_table, a tied output layer's weight
// among them) with decay_embeddings. Every other optimizer decays everything.
#pragma once
#include "core/config/job_config.h"
#include "core/nn/param_store.h"
#include "core/optim/decay_mask.h"

namespace dtrain {

DecayMask weightDecayMask(const ParamStore& store, const OptimizerSection& cfg);

}  // namespace dtrain
