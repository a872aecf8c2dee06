#include "core/train/train_state.h"

#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/config/job_to_toml.h"
#include "core/config/parse_job.h"
#include "core/errors.h"

namespace dtrain {

namespace {
constexpr int64_t kStateFormat = 1;
}

std::string trainStateToToml(const TrainState& state, const JobConfig& job) {
  std::ostringstream s;
  s << "# Written by dtrain at a checkpoint. [state] says where training stands;\n"
    << "# the tables after it are the resolved job the run was started with.\n"
    << "[state]\n"
    << "format = " << kStateFormat << "\n"
    << "step = " << state.step << "\n"
    << "epoch = " << state.epoch << "\n"
    << "position = " << state.position << "\n"
    << "# sample order = f(seed, epoch); dropout masks = f(seed, step, sample)\n"
    << "rng = \"counter-based\"\n"
    << "seed = " << static_cast<int64_t>(job.job.seed) << "\n";
  if (state.best_test_accuracy >= 0) s << "best_test_accuracy = " << state.best_test_accuracy << "\n";
  if (state.loss_scale > 0) {
    char scale[40];
    std::snprintf(scale, sizeof scale, "%.17g", state.loss_scale);
    std::string text = scale;
    if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a TOML float
    s << "# fp16's dynamic loss scale, finite steps since it last changed, steps skipped\n"
      << "loss_scale = " << text << "\n"
      << "loss_scale_good_steps = " << state.loss_scale_good_steps << "\n"
      << "skipped_steps = " << state.skipped_steps << "\n";
  }
  s << "\n" << jobToToml(job);
  return s.str();
}

void trainStateFromToml(const std::string& text, const std::string& origin, TrainState* state,
                        JobConfig* job) {
  toml::table table;
  try {
    table = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw CheckpointError(origin + ": not valid TOML (" + std::string(e.description()) + ")");
  }
  const toml::table* st = table["state"].as_table();
  if (!st) throw CheckpointError(origin + ": has no [state] table; it is not a dtrain checkpoint state");
  auto need = [&](const char* key) -> int64_t {
    auto v = (*st)[key].value<int64_t>();
    if (!v || *v < 0) throw CheckpointError(origin + ": [state] " + key + " is missing or negative");
    return *v;
  };
  if (need("format") != kStateFormat)
    throw CheckpointError(origin + ": state format " + std::to_string(need("format")) +
                          " is not the one this dtrain reads (" + std::to_string(kStateFormat) + ")");
  state->step = need("step");
  state->epoch = need("epoch");
  state->position = need("position");
  state->best_test_accuracy = (*st)["best_test_accuracy"].value_or(-1.0);
  if (st->contains("loss_scale")) {
    const double scale = (*st)["loss_scale"].value_or(-1.0);
    if (!(scale > 0 && std::isfinite(scale)))
      throw CheckpointError(origin + ": [state] loss_scale must be a positive finite number");
    state->loss_scale = scale;
    state->loss_scale_good_steps = need("loss_scale_good_steps");
    state->skipped_steps = need("skipped_steps");
  }
  table.erase("state");
  *job = parseJobTable(table, origin);
}

}  // namespace dtrain
