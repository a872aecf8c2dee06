// The typed form of a job file. Every field has the documented default shown
// here; parse_job.h fills these from TOML and validate_job.h checks them.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config/layer_options.h"
#include "core/config/source_pos.h"

namespace dtrain {

struct JobSection {
  std::string name;          // default: the job file's stem
  std::string run_dir;       // default: "runs/<name>"
  uint64_t seed = 42;
  int threads = 0;           // compute threads; 0 = one per core
  std::string device = "cpu";  // "auto" | "cpu" | "cuda" (cuda: later issue)
};

// One entry of [[model.layers]]: name, type, inputs, and type-specific options.
struct LayerSpec {
  std::string name;
  std::string type;
  std::vector<std::string> inputs;  // empty = the previous layer (or the input)
  LayerOptions options;             // everything else in the table, with positions
  SourcePos pos;
};

struct ModelSection {
  std::string preset;               // "mlp" | "cnn" | "" when `layers` is given
  std::vector<int64_t> hidden = {512, 256};  // mlp: widths of the hidden dense layers
  double dropout = 0.0;             // mlp: dropout after each hidden relu (0 = none)
  std::string init = "he";          // "he" | "glorot": weight initialisation
  std::vector<LayerSpec> layers;    // explicit layer list (instead of a preset)
};

struct DataSection {
  std::string dataset = "fashion_mnist";  // "fashion_mnist" | "idx" | "synthetic"
  // idx / fashion_mnist: a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // synthetic: generated, seeded, learnable data
  int64_t train_samples = 6000;
  int64_t test_samples = 1000;
  std::vector<int64_t> shape = {1, 28, 28};  // synthetic sample shape [C,H,W]
  int64_t classes = 10;
  bool shuffle = true;      // seeded shuffle each epoch
  int prefetch = 2;         // batches prepared ahead on the loader thread
};

struct TrainSection {
  int64_t epochs = 10;      // train for this many epochs ...
  int64_t steps = 0;        // ... or this many steps, when > 0 (then epochs is ignored)
  int64_t batch_size = 128;
  int64_t eval_batch_size = 1000;
  int64_t eval_every_steps = 0;     // 0 = off
  bool eval_every_epoch = true;
  int64_t checkpoint_every_steps = 0;  // 0 = off
  bool checkpoint_every_epoch = true;
  int64_t keep_last = 3;            // checkpoints kept on disk
  double log_every_seconds = 5.0;   // plain progress lines when not on a terminal
  double grad_clip_norm = 0.0;      // 0 = no clipping
};

struct OptimizerSection {
  std::string type = "sgd";  // "sgd" | "adam" | "adamw"
  double lr = 0.05;
  double momentum = 0.9;     // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0.0; // sgd/adam: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9;        // adam/adamw
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct ScheduleSection {
  std::string type = "constant";  // "constant" | "step" | "cosine"
  int64_t warmup_steps = 0;       // linear warm-up from 0 in front of any schedule
  int64_t step_every = 1000;      // step: multiply by gamma every this many steps
  double gamma = 0.1;
  double min_lr = 0.0;            // cosine: floor reached at the last step
};

struct StrategySection {
  std::string type = "one_device";  // only one_device in this build
};

struct JobConfig {
  std::string source_path;  // the job file it was read from ("" if built in code)
  JobSection job;
  ModelSection model;
  DataSection data;
  TrainSection train;
  OptimizerSection optimizer;
  ScheduleSection schedule;
  StrategySection strategy;
  // Where each set key came from ("optimizer.lr" -> job.toml:12:5), for validator messages.
  std::map<std::string, SourcePos> positions;

  // Position of a key for messages; the job file itself when the key was defaulted.
  SourcePos posOf(const std::string& dotted_key) const;
};

}  // namespace dtrain
