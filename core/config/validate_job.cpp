#include "core/config/validate_job.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/config/fail_at.h"
#include "core/config/host_port.h"
#include "core/config/suggest.h"
#include "core/config/value_text.h"

namespace dtrain {
namespace {

class Checker {
 public:
  explicit Checker(const JobConfig& job) : job_(job) {}

  // "<pos of section.key>: [section] key <msg>"
  [[noreturn]] void fail(const std::string& dotted, const std::string& msg) const {
    size_t dot = dotted.find('.');
    failAt(job_.posOf(dotted), "[" + dotted.substr(0, dot) + "] " + dotted.substr(dot + 1) + " " + msg);
  }

  void intRange(const std::string& dotted, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi)
      fail(dotted, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                       std::to_string(v) + ")");
  }
  void intAtLeast(const std::string& dotted, int64_t v, int64_t min) const {
    if (v < min) fail(dotted, (min == 1 ? "must be > 0" : "must be >= " + std::to_string(min)) + got(v));
  }

  void finite(const std::string& dotted, double v) const {
    if (!std::isfinite(v)) fail(dotted, "must be a finite number" + got(v));
  }
  void positive(const std::string& dotted, double v) const {
    finite(dotted, v);
    if (!(v > 0)) fail(dotted, "must be > 0" + got(v));
  }
  void nonNegative(const std::string& dotted, double v) const {
    finite(dotted, v);
    if (!(v >= 0)) fail(dotted, "must be >= 0" + got(v));
  }
  // [0, 1): momentum, betas, dropout.
  void fraction(const std::string& dotted, double v) const {
    if (!(v >= 0 && v < 1)) fail(dotted, "must be in [0, 1)" + got(v));
  }

  void oneOf(const std::string& dotted, const std::string& v, const std::vector<std::string>& choices,
             const std::vector<std::string>& hint_from = {}) const {
    for (const std::string& c : choices)
      if (v == c) return;
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) list += (i ? ", '" : "'") + choices[i] + "'";
    std::string msg =
        (choices.size() == 1 ? "must be " : "must be one of ") + list + " (got " + quoteString(v);
    std::string hint = closestMatch(v, hint_from.empty() ? choices : hint_from);
    if (!hint.empty()) msg += "; did you mean '" + hint + "'?";
    fail(dotted, msg + ")");
  }

  // A message about a whole section, at its header (or the file when absent).
  [[noreturn]] void failSection(const std::string& section, const std::string& msg) const {
    failAt(job_.posOf(section), "[" + section + "] " + msg);
  }

  // "<pos>: [section] key <msg>" at the key when it was written, else at `fallback`
  // (a section header or another key): a defaulted key has no line of its own.
  [[noreturn]] void failOr(const std::string& dotted, const std::string& fallback,
                           const std::string& msg) const {
    size_t dot = dotted.find('.');
    failAt(given(dotted) ? job_.posOf(dotted) : job_.posOf(fallback),
           "[" + dotted.substr(0, dot) + "] " + dotted.substr(dot + 1) + " " + msg);
  }

  // "<pos>: [cluster] hosts[i].key <msg>", at the key, else at the host's entry.
  [[noreturn]] void failHost(size_t i, const std::string& key, const std::string& msg) const {
    const std::string entry = "hosts[" + std::to_string(i) + "]";
    const ClusterHost& host = job_.cluster.hosts[i];
    const std::string dotted = "cluster." + entry + "." + key;
    SourcePos pos = given(dotted) || host.pos.origin.empty() ? job_.posOf(dotted) : host.pos;
    failAt(pos, "[cluster] " + entry + "." + key + " " + msg);
  }

  // Whether the key was written (in the file or a --set), rather than defaulted.
  bool given(const std::string& dotted) const { return job_.positions.count(dotted) != 0; }

  static std::string got(int64_t v) { return " (got " + std::to_string(v) + ")"; }
  static std::string got(double v) { return " (got " + formatFloat(v) + ")"; }

 private:
  const JobConfig& job_;
};

void checkJobSection(const Checker& c, const JobSection& s) {
  c.intRange("job.threads", s.threads, 0, 256);
  c.oneOf("job.device", s.device, {"auto", "cpu", "cuda"});
  c.oneOf("job.precision", s.precision, {"fp32", "tf32", "bf16", "fp16"});
  c.oneOf("job.cpu_bf16", s.cpu_bf16, {"auto", "require"});
  c.intRange("job.gpu_workspace_mb", s.gpu_workspace_mb, 1, 65536);
  c.finite("job.memory_limit_mb", s.memory_limit_mb);
  if (s.memory_limit_mb < 0)
    c.fail("job.memory_limit_mb",
           "must be >= 0 (0: the memory cgroup's limit, if any)" + Checker::got(s.memory_limit_mb));
}

void checkLayers(const std::vector<LayerSpec>& layers) {
  std::map<std::string, const LayerSpec*> seen;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[i];
    if (layer.name.empty())
      failAt(layer.pos, "[model.layers] entry " + std::to_string(i + 1) + " has an empty name");
    if (layer.type.empty()) failAt(layer.pos, "[model.layers] '" + layer.name + "' has an empty type");
    auto [it, inserted] = seen.emplace(layer.name, &layer);
    if (!inserted) {
      std::string first = it->second->pos.str();
      failAt(layer.pos, "[model.layers] duplicate layer name '" + layer.name + "'" +
                            (first.empty() ? "" : " (first used at " + first + ")"));
    }
  }
}

void checkModel(const Checker& c, const ModelSection& m) {
  if (!m.preset.empty()) c.oneOf("model.preset", m.preset, {"mlp", "cnn", "resnet", "mobilenet_v2", "gpt"});
  if (m.preset.empty() && m.layers.empty())
    c.failSection(
        "model",
        "needs a preset ('mlp', 'cnn', 'resnet', 'mobilenet_v2' or 'gpt') or a list of [[model.layers]]");
  if (m.blocks_given && m.preset != "gpt")
    c.fail("model.layers",
           "= " + std::to_string(m.blocks) +
               " counts the gpt preset's blocks; set preset = \"gpt\", or list layers as [[model.layers]]");
  if (m.preset == "gpt") {
    c.intRange("model.layers", m.blocks, 1, 1024);
    c.intRange("model.heads", m.heads, 1, 1024);
    c.intRange("model.dim", m.dim, 1, 1 << 16);
    c.intRange("model.context", m.context, 1, 1 << 20);
    c.intRange("model.vocab", m.vocab, 0, int64_t{1} << 31);
    if (m.dim % m.heads != 0)
      c.fail("model.dim",
             "must be a multiple of heads (" + std::to_string(m.heads) + ")" + Checker::got(m.dim));
  }
  if (!m.preset.empty() && !m.layers.empty())
    c.fail("model.preset", "'" + m.preset + "' and [[model.layers]] are both given; use one or the other");
  if (m.preset == "mlp") {
    if (m.hidden.empty()) c.fail("model.hidden", "must list at least one width for preset 'mlp' (got [])");
    for (size_t i = 0; i < m.hidden.size(); ++i)
      if (m.hidden[i] <= 0)
        c.fail("model.hidden", "entries must be > 0 (got " + std::to_string(m.hidden[i]) + " at index " +
                                   std::to_string(i) + ")");
  }
  const bool imagenet_depth =
      m.depth == 18 || m.depth == 34 || m.depth == 50 || m.depth == 101 || m.depth == 152;
  if (m.preset == "resnet" && !(imagenet_depth || (m.depth >= 8 && (m.depth - 2) % 6 == 0)))
    c.fail("model.depth",
           "must be 18, 34, 50, 101 or 152 (torchvision's ResNets) or 6n+2 for a CIFAR-style ResNet: 20, 32, "
           "44, "
           "56, 110 (got " +
               std::to_string(m.depth) + ")");
  c.finite("model.width", m.width);
  if (!(m.width >= 0.1 && m.width <= 4)) c.fail("model.width", "must be in [0.1, 4]" + Checker::got(m.width));
  c.fraction("model.dropout", m.dropout);
  c.oneOf("model.init", m.init, {"he", "glorot"});
  checkLayers(m.layers);
}

void checkDatasetDir(const Checker& c, const DataSection& d) {
  std::string fix = "set dir to a folder holding the IDX files";
  if (d.dataset == "fashion_mnist")
    fix = "install the dataset-fashion-mnist package or set dir to a folder holding the IDX files";
  if (d.dataset == "cifar10" || d.dataset == "cifar100")
    fix = "set dir to the folder holding the unpacked CIFAR binary (.bin) files";
  if (d.dataset == "image_folder") fix = "set dir to a folder holding one sub-folder of images per class";
  std::error_code ec;
  if (!std::filesystem::exists(d.dir, ec)) c.fail("data.dir", "'" + d.dir + "' does not exist; " + fix);
  if (!std::filesystem::is_directory(d.dir, ec))
    c.fail("data.dir", "'" + d.dir + "' is not a directory; " + fix);
}

void checkImageFolder(const Checker& c, const DataSection& d) {
  if (!d.validation_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d.validation_dir, ec))
      c.fail("data.validation_dir",
             "'" + d.validation_dir +
                 "' is not a directory; set it to a folder with the same class "
                 "sub-folders as dir, or remove it to split dir by validation_fraction");
  } else if (!(d.validation_fraction > 0 && d.validation_fraction < 1)) {
    c.fail("data.validation_fraction",
           "must be in (0, 1) when no validation_dir is given" + Checker::got(d.validation_fraction));
  }
  if (d.image_size.size() != 2 || d.image_size[0] < 1 || d.image_size[1] < 1 || d.image_size[0] > 4096 ||
      d.image_size[1] > 4096)
    c.fail("data.image_size",
           "must be [height, width] with extents in [1, 4096] (got " + formatIntArray(d.image_size) + ")");
  if (d.channels != 1 && d.channels != 3)
    c.fail("data.channels", "must be 1 (grey) or 3 (RGB)" + Checker::got(d.channels));
  c.oneOf("data.bad_images", d.bad_images, {"skip", "fail"});
}

void checkNormalisation(const Checker& c, const DataSection& d) {
  const std::pair<const char*, const std::vector<double>*> lists[] = {{"data.mean", &d.mean},
                                                                      {"data.std", &d.std}};
  for (const auto& [key, values] : lists) {
    if (values->size() > 1 && d.dataset == "image_folder" &&
        static_cast<int64_t>(values->size()) != d.channels)
      c.fail(key, "must have one value or one per channel (" + std::to_string(d.channels) + "), got " +
                      formatFloatArray(*values));
    for (double v : *values) c.finite(key, v);
  }
  for (double s : d.std)
    if (!(s > 0)) c.fail("data.std", "entries must be > 0 (got " + formatFloatArray(d.std) + ")");
}

void checkAugmentation(const Checker& c, const DataSection& d) {
  c.intRange("data.augment_crop_padding", d.augment_crop_padding, 0, 1024);
  const std::vector<double>& s = d.augment_scale;
  if (s.size() != 2 || !(s[0] > 0 && s[0] <= s[1] && s[1] <= 1))
    c.fail("data.augment_scale",
           "must be [min, max] area fractions with 0 < min <= max <= 1 (got " + formatFloatArray(s) + ")");
  const std::vector<double>& r = d.augment_ratio;
  if (r.size() != 2 || !(r[0] > 0 && r[0] <= r[1] && std::isfinite(r[1])))
    c.fail("data.augment_ratio",
           "must be [min, max] aspect ratios with 0 < min <= max (got " + formatFloatArray(r) + ")");
}

// 1 TiB: more than any GPU holds, small enough that the bytes fit an int64_t.
constexpr int64_t kMaxDeviceCacheMb = int64_t{1} << 20;

void checkData(const Checker& c, const DataSection& d) {
  c.oneOf("data.dataset", d.dataset,
          {"fashion_mnist", "idx", "cifar10", "cifar100", "image_folder", "synthetic", "tokens", "text"});
  const bool tokens = d.dataset == "tokens" || d.dataset == "text";
  if (tokens) {
    if (d.files.empty())
      c.fail("data.files",
             "dataset \"" + d.dataset + "\" needs files = \"PATH or GLOB\" (the training corpus)");
    c.intRange("data.context", d.context, 1, int64_t{1} << 20);
    c.intRange("data.vocab", d.vocab, 2, int64_t{1} << 31);
    c.intRange("data.pad_id", d.pad_id, -1, (d.dataset == "text" ? 256 : d.vocab) - 1);
    if (d.validation_files.empty() && !(d.validation_fraction > 0 && d.validation_fraction < 1))
      c.fail("data.validation_fraction",
             "must be in (0, 1) when no validation_files are given" + Checker::got(d.validation_fraction));
  }
  if (d.dataset != "synthetic" && !tokens) checkDatasetDir(c, d);
  if (d.dataset == "image_folder") checkImageFolder(c, d);
  checkNormalisation(c, d);
  checkAugmentation(c, d);
  if (d.dataset == "synthetic") {
    c.intAtLeast("data.train_samples", d.train_samples, 1);
    c.intAtLeast("data.test_samples", d.test_samples, 1);
    if (d.shape.size() != 3)
      c.fail("data.shape", "must be [channels, height, width] (got " + formatIntArray(d.shape) + ")");
    for (int64_t extent : d.shape)
      if (extent <= 0) c.fail("data.shape", "extents must be > 0 (got " + formatIntArray(d.shape) + ")");
    c.intAtLeast("data.classes", d.classes, 2);
  }
  c.intRange("data.prefetch", d.prefetch, 1, 64);
  c.intRange("data.loader_threads", d.loader_threads, 0, 256);
  if (d.device_cache_mb < -1 || d.device_cache_mb > kMaxDeviceCacheMb)
    c.fail("data.device_cache_mb", "must be -1 (a quarter of the GPU's free memory), 0 (off) or MiB up to " +
                                       std::to_string(kMaxDeviceCacheMb) + Checker::got(d.device_cache_mb));
}

void checkTrain(const Checker& c, const TrainSection& t) {
  c.intAtLeast("train.steps", t.steps, 0);
  if (t.steps == 0 && t.epochs <= 0)
    c.fail("train.epochs", "must be > 0 when steps is 0" + Checker::got(t.epochs));
  c.intRange("train.batch_size", t.batch_size, 1, 65536);
  c.intRange("train.accumulate", t.accumulate, 1, 65536);
  if (t.accumulate > 1 && t.batch_size * t.accumulate > (int64_t{1} << 24))
    c.fail("train.accumulate", "makes an update of " + std::to_string(t.batch_size * t.accumulate) +
                                   " samples (batch_size x accumulate), more than 16777216");
  c.intAtLeast("train.eval_batch_size", t.eval_batch_size, 1);
  c.intAtLeast("train.eval_every_steps", t.eval_every_steps, 0);
  c.intAtLeast("train.checkpoint_every_steps", t.checkpoint_every_steps, 0);
  c.intAtLeast("train.keep_last", t.keep_last, 1);
  c.positive("train.log_every_seconds", t.log_every_seconds);
  c.nonNegative("train.grad_clip_norm", t.grad_clip_norm);
  c.fraction("train.label_smoothing", t.label_smoothing);
  c.positive("train.loss_scale_initial", t.loss_scale_initial);
  if (!(t.loss_scale_initial <= 1e30))
    c.fail("train.loss_scale_initial", "must be at most 1e30" + Checker::got(t.loss_scale_initial));
  c.intAtLeast("train.loss_scale_growth_interval", t.loss_scale_growth_interval, 1);
  c.finite("train.loss_scale_backoff", t.loss_scale_backoff);
  if (!(t.loss_scale_backoff > 0 && t.loss_scale_backoff < 1))
    c.fail("train.loss_scale_backoff", "must be in (0, 1)" + Checker::got(t.loss_scale_backoff));
  c.finite("train.loss_scale_growth", t.loss_scale_growth);
  if (!(t.loss_scale_growth >= 1 && t.loss_scale_growth <= 1e6))
    c.fail("train.loss_scale_growth", "must be in [1, 1e6]" + Checker::got(t.loss_scale_growth));
}

// fp16's loss scale is one for every worker: each step's overflow is decided
// over gradients every worker sees (summed, or agreed on). A synchronous
// parameter server's shards see every slice's overflow before they apply an
// update; asynchronous ones apply pushes no other worker ever compares.
void checkPrecision(const Checker& c, const JobConfig& job) {
  if (job.job.precision != "fp16" || job.strategy.type != "parameter_server") return;
  if (job.strategy.consistency != "sync")
    c.failOr(
        "job.precision", "strategy.consistency",
        "\"fp16\" needs a parameter server with consistency = \"sync\" (asynchronous workers never agree "
        "on a step's overflow, so their loss scales would part); use precision = \"bf16\", which needs no "
        "loss scale, or consistency = \"sync\"");
  if (job.strategy.gradient_push == "during_backward")
    c.failOr("job.precision", "strategy.gradient_push",
             "\"fp16\" pushes gradients after backward (a part sent during it cannot be unscaled yet); use "
             "gradient_push = \"auto\" or \"after_backward\"");
}

void checkOptimizer(const Checker& c, const OptimizerSection& o) {
  c.oneOf("optimizer.type", o.type, {"sgd", "adam", "adamw"});
  c.positive("optimizer.lr", o.lr);
  c.fraction("optimizer.momentum", o.momentum);
  if (o.nesterov && !(o.momentum > 0))
    c.fail("optimizer.nesterov", "needs momentum > 0 (got momentum " + formatFloat(o.momentum) + ")");
  c.nonNegative("optimizer.weight_decay", o.weight_decay);
  // SGD's and Adam's weight decay is L2 added to every gradient (as
  // PyTorch's): the keys choosing AdamW's tensors would change nothing.
  if (o.type != "adamw")
    for (const auto& [key, on] :
         {std::pair<const char*, bool>{"optimizer.decay_1d", o.decay_1d},
          std::pair<const char*, bool>{"optimizer.decay_embeddings", o.decay_embeddings}})
      if (on)
        c.fail(key, "chooses the tensors of adamw's decoupled weight decay; " + o.type +
                        "'s weight_decay applies to every tensor (set type = \"adamw\", or drop the key)");
  c.fraction("optimizer.beta1", o.beta1);
  c.fraction("optimizer.beta2", o.beta2);
  c.positive("optimizer.eps", o.eps);
}

void checkSchedule(const Checker& c, const ScheduleSection& s, double lr) {
  c.oneOf("schedule.type", s.type, {"constant", "step", "cosine"});
  c.intAtLeast("schedule.warmup_steps", s.warmup_steps, 0);
  c.intAtLeast("schedule.step_every", s.step_every, 1);
  if (!(s.gamma > 0 && s.gamma <= 1)) c.fail("schedule.gamma", "must be in (0, 1]" + Checker::got(s.gamma));
  c.nonNegative("schedule.min_lr", s.min_lr);
  if (!(s.min_lr < lr))
    c.fail("schedule.min_lr",
           "must be < optimizer.lr (got " + formatFloat(s.min_lr) + ", lr " + formatFloat(lr) + ")");
}

// [strategy] type = "pipeline": its keys, and the configurations no schedule exists for.
void checkPipeline(const Checker& c, const StrategySection& s, const ClusterSection& cluster) {
  c.intRange("strategy.stages", s.stages, 1, 64);
  c.intRange("strategy.micro_batches", s.micro_batches, 1, 4096);
  c.intRange("strategy.replicas", s.replicas, 1, 64);
  c.oneOf("strategy.schedule", s.schedule, {"1f1b", "gpipe"});
  c.finite("strategy.stage_memory_mb", s.stage_memory_mb);
  c.nonNegative("strategy.stage_memory_mb", s.stage_memory_mb);
  c.intRange("strategy.rebalance_after_steps", s.rebalance_after_steps, 0, 1000000);
  c.oneOf("strategy.split_by", s.split_by, {"time", "flops"});
  if (s.stage_memory_mb > 0 && !s.stage_layers.empty())
    c.fail("strategy.stage_memory_mb",
           "limits the automatic split, but [[strategy.stages]] name the layers; "
           "remove one or the other");
  if (!s.stage_layers.empty() && static_cast<int>(s.stage_layers.size()) != s.stages)
    c.fail("strategy.stages", "is " + std::to_string(s.stages) + " but " +
                                  std::to_string(s.stage_layers.size()) +
                                  " [[strategy.stages]] tables name the layers; give one or the other");
  if (s.type != "pipeline") {
    if (!s.stage_layers.empty())
      c.fail("strategy.stages", "names pipeline stages, but [strategy] type is '" + s.type +
                                    "'; remove them or use type = \"pipeline\"");
    return;
  }
  // 1f1b alternates a forward with a backward: with fewer micro-batches than
  // stages a stage has nothing to alternate with (torchtitan#775 deadlocked).
  if (s.schedule == "1f1b" && s.micro_batches < s.stages)
    c.failOr("strategy.schedule", "strategy.micro_batches",
             "\"1f1b\" needs micro_batches >= stages (got " + std::to_string(s.micro_batches) + " over " +
                 std::to_string(s.stages) + " stages); raise micro_batches or use schedule = \"gpipe\"");
  if (s.stages * s.replicas < 2)
    c.failOr("strategy.stages", "strategy.replicas",
             "give a pipeline at least 2 processes (stages x replicas); for one process use type = "
             "\"one_device\"");
  // Across hosts the processes are the hosts' slots: one per stage of every replica.
  if (cluster.present && !cluster.hosts.empty()) {
    int slots = 0;
    for (const ClusterHost& h : cluster.hosts) slots += std::max(0, h.slots);
    if (slots != s.stages * s.replicas)
      c.failOr("strategy.stages", "cluster.hosts",
               "x replicas is " + std::to_string(s.stages * s.replicas) +
                   " processes, but the [cluster] hosts have " + std::to_string(slots) +
                   " slots; give the hosts one slot per stage of every replica");
  }
}

// A worker's memory is predicted for the strategies whose workers all hold
// the same (cli/memory_check); a pipeline's stages and a parameter server's
// shards are sized apart.
void checkMemoryLimit(const Checker& c, const StrategySection& s, const JobSection& job) {
  if (job.memory_limit_mb <= 0) return;
  if (s.type == "pipeline")
    c.failOr(
        "job.memory_limit_mb", "strategy.type",
        "is not checked for a pipeline's stages yet; use [strategy] stage_memory_mb, which its split keeps "
        "each stage within");
  if (s.type == "parameter_server")
    c.failOr("job.memory_limit_mb", "strategy.type",
             "is not checked for a parameter server's workers and shards yet; remove it");
}

void checkSharded(const Checker& c, const StrategySection& s, const JobSection& job) {
  if (s.type == "sharded" && job.device == "cuda")
    c.failOr("strategy.type", "job.device",
             "'sharded' runs on CPU workers in this build (GPU sharding is not built yet); use device = "
             "\"cpu\", or 'mirrored' on GPUs");
  c.intRange("strategy.stage", s.stage, 1, 3);
  if (s.type != "sharded" || s.stage != 3) return;
  // Stage 3 gathers each layer group as the one compute thread reaches it.
  if (job.threads > 1)
    c.failOr("job.threads", "strategy.stage",
             "must be 1 with stage 3 (a worker gathers each layer's parameters for one compute thread); "
             "run more workers instead, or use stage = 2");
  if (job.precision == "bf16" || job.precision == "fp16")
    c.failOr("job.precision", "strategy.stage",
             "\"" + job.precision +
                 "\" is not built for stage 3 yet (the 16-bit copy of the parameters is "
                 "made whole at each forward's start); use precision = \"fp32\", or stage = 2");
  if (s.sync_batchnorm)
    c.failOr("strategy.sync_batchnorm", "strategy.stage",
             "is not built for stage 3 yet (its statistics would meet the parameter gathers on the same "
             "collectives); use stage = 2");
}

void checkStrategy(const Checker& c, const StrategySection& s, const ClusterSection& cluster,
                   bool under_launcher) {
  static const std::vector<std::string> available = {
      "one_device", "mirrored", "multi_worker_mirrored", "central_storage", "parameter_server",
      "pipeline",   "sharded"};
  static const std::vector<std::string> planned = {};  // named but not built yet
  for (const std::string& p : planned)
    if (s.type == p) {
      std::string use;
      for (size_t i = 0; i < available.size(); ++i)
        use += (i == 0 ? "" : i + 1 == available.size() ? " or " : ", ") + ("'" + available[i] + "'");
      c.fail("strategy.type", "'" + p + "' is not available in this build yet; use " + use);
    }
  std::vector<std::string> known = available;
  known.insert(known.end(), planned.begin(), planned.end());
  c.oneOf("strategy.type", s.type, available, known);
  c.intRange("strategy.workers", s.workers, 1, 64);
  c.intRange("strategy.ps", s.ps, 1, 64);
  c.oneOf("strategy.consistency", s.consistency, {"sync", "async", "bounded"});
  c.oneOf("strategy.gradient_push", s.gradient_push, {"auto", "during_backward", "after_backward"});
  c.intRange("strategy.staleness", s.staleness, 0, 1000000);
  // Across hosts the workers are the hosts' slots.
  int workers = s.workers;
  if (cluster.present && !cluster.hosts.empty()) {
    workers = 0;
    for (const ClusterHost& h : cluster.hosts) workers += std::max(0, h.slots);
  }
  c.intRange("strategy.min_workers", s.min_workers, 1, std::max(1, workers));
  // Workers at their own pace cannot meet mid-pass to sum batch statistics.
  if (s.type == "parameter_server" && s.consistency != "sync" && s.sync_batchnorm)
    c.failOr("strategy.sync_batchnorm", "strategy.consistency",
             "needs workers that step together; use consistency = \"sync\" or set sync_batchnorm = false");
  // [[cluster.hosts]] ps: where a parameter server's shards run.
  int placed = 0;
  bool any_placed = false;
  for (size_t h = 0; h < cluster.hosts.size(); ++h) {
    const int ps = cluster.hosts[h].ps;
    if (ps < 0 && c.given("cluster.hosts[" + std::to_string(h) + "].ps"))
      c.failHost(h, "ps", "must be >= 0" + Checker::got(static_cast<int64_t>(ps)));
    if (ps < 0) continue;
    any_placed = true;
    placed += ps;
    if (s.type != "parameter_server")
      c.failHost(h, "ps",
                 "places parameter-server shards, but [strategy] type is '" + s.type +
                     "'; remove it or use type = \"parameter_server\"");
    if (ps > 64) c.failHost(h, "ps", "must be <= 64" + Checker::got(static_cast<int64_t>(ps)));
  }
  if (s.type == "parameter_server" && any_placed && placed != s.ps)
    c.failOr("strategy.ps", "cluster.hosts",
             "is " + std::to_string(s.ps) + " but the [[cluster.hosts]] ps entries add up to " +
                 std::to_string(placed) + "; make them agree (hosts without ps run no shard)");
  checkPipeline(c, s, cluster);
  c.oneOf("strategy.collective", s.collective,
          {"auto", "shared_memory", "hierarchical", "ring", "halving_doubling", "bcube"});
  c.oneOf("strategy.backend", s.backend, {"auto", "nccl", "gloo"});
  c.finite("strategy.bucket_mb", s.bucket_mb);
  if (!(s.bucket_mb > 0 && s.bucket_mb <= 1024))
    c.fail("strategy.bucket_mb", "must be in (0, 1024]" + Checker::got(s.bucket_mb));

  // The strategy and [cluster] have to agree on how many hosts take part.
  const size_t hosts = cluster.hosts.size();
  if (s.type == "multi_worker_mirrored" && !cluster.present && !under_launcher)
    c.fail("strategy.type",
           "'multi_worker_mirrored' needs a [cluster] section: coordinator, token or token_file, and a "
           "[[cluster.hosts]] table for each host");
  if (s.type == "mirrored" && cluster.present && hosts > 1)
    c.fail("strategy.type", "'mirrored' runs on one host, but [cluster] lists " + std::to_string(hosts) +
                                " hosts; use 'multi_worker_mirrored'");
  // The variables live in one process: its workers share its host.
  if (s.type == "central_storage" && cluster.present && hosts > 1)
    c.failOr("strategy.type", "cluster",
             "'central_storage' runs on one host (the variables in one place), but [cluster] lists " +
                 std::to_string(hosts) + " hosts; use 'multi_worker_mirrored'");
  if (s.type == "one_device" && cluster.present)
    c.failOr("strategy.type", "cluster",
             "'one_device' runs a single process and takes no [cluster]; use " +
                 std::string(hosts > 1 ? "'multi_worker_mirrored'"
                                       : "'mirrored' (one host) or 'multi_worker_mirrored'") +
                 ", or remove [cluster]");
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

void checkClusterToken(const Checker& c, const ClusterSection& cl) {
  if (!cl.token.empty() && !cl.token_file.empty())
    c.failOr("cluster.token_file", "cluster.token", "and token are both given; use one or the other");
  if (cl.token.empty() && cl.token_file.empty()) {
    if (c.given("cluster.token")) c.fail("cluster.token", "must not be empty");
    if (c.given("cluster.token_file")) c.fail("cluster.token_file", "must not be empty");
    c.failSection("cluster",
                  "needs token (a shared secret every worker presents) or token_file (a file holding it)");
  }
  if (cl.token_file.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(cl.token_file, ec))
    c.fail("cluster.token_file", "'" + cl.token_file + "' does not exist");
  if (std::filesystem::is_directory(cl.token_file, ec))
    c.fail("cluster.token_file", "'" + cl.token_file + "' is a directory, not a file");
}

void checkClusterHosts(const Checker& c, const ClusterSection& cl) {
  if (cl.hosts.empty()) {
    if (c.given("cluster.hosts")) c.fail("cluster.hosts", "must list at least one host (got [])");
    c.failSection("cluster", "needs hosts: a [[cluster.hosts]] table (address, slots) for each host");
  }
  std::map<std::string, size_t> seen;  // lower-case address -> first index
  for (size_t i = 0; i < cl.hosts.size(); ++i) {
    const ClusterHost& h = cl.hosts[i];
    if (h.address.empty()) c.failHost(i, "address", "must not be empty");
    size_t colon = h.address.find(':');
    if (colon != std::string::npos && h.address.find(':', colon + 1) == std::string::npos)
      c.failHost(i, "address",
                 "must be a host name or IP address without a port (got " + quoteString(h.address) + ")");
    auto [it, inserted] = seen.emplace(lower(h.address), i);
    if (!inserted) {
      const std::string first = "hosts[" + std::to_string(it->second) + "]";
      c.failHost(i, "address", quoteString(h.address) + " is listed twice (first as " + first + ".address)");
    }
    if (h.slots < 1) c.failHost(i, "slots", "must be > 0" + Checker::got(static_cast<int64_t>(h.slots)));
    if (h.slots > 64) c.failHost(i, "slots", "must be <= 64" + Checker::got(static_cast<int64_t>(h.slots)));
  }
}

// from = "tf_config": TF_CONFIG names the coordinator and the hosts, so the
// job must not name its own (which would silently lose).
void checkClusterFromTfConfig(const Checker& c, const ClusterSection& cl) {
  if (c.given("cluster.coordinator"))
    c.fail("cluster.coordinator",
           "must not be given with from = \"tf_config\": TF_CONFIG names the coordinator (its chief, else "
           "worker 0)");
  if (c.given("cluster.hosts") || !cl.hosts.empty())
    c.fail("cluster.hosts", "must not be given with from = \"tf_config\": TF_CONFIG lists the hosts");
}

// In-job recovery re-forms a group of replicas that are identical after every
// step; it needs dtrain's own host processes, which keep the survivors running.
void checkElastic(const Checker& c, const ClusterSection& cl, const StrategySection& s, bool under_launcher) {
  if (!cl.elastic) return;
  if (s.type != "mirrored" && s.type != "multi_worker_mirrored")
    c.failOr("cluster.elastic", "strategy.type",
             "recovers mirrored and multi_worker_mirrored runs, whose replicas are identical after every "
             "step; strategy '" +
                 s.type + "' keeps state a lost worker takes with it: set elastic = false");
  if (under_launcher)
    c.fail("cluster.elastic",
           "needs dtrain's own processes on each host (`dtrain train` there); under a launcher use its "
           "restarts, or start the hosts with `dtrain train --node N`");
}

void checkCluster(const Checker& c, const ClusterSection& cl, bool under_launcher) {
  if (!cl.present) return;
  c.oneOf("cluster.from", cl.from, {"", "tf_config", "job"});
  if (cl.from == "tf_config") {
    checkClusterFromTfConfig(c, cl);
  } else {
    // Under a launcher its MASTER_ADDR stands in for a coordinator not given.
    if (cl.coordinator.empty() && !under_launcher && !c.given("cluster.coordinator"))
      c.failSection("cluster",
                    "needs coordinator = \"host:port\" (where node 0 serves the rendezvous, like "
                    "\"10.0.0.1:29500\"), or from = \"tf_config\"");
    std::string problem;
    if (!(under_launcher && cl.coordinator.empty()) && !parseHostPort(cl.coordinator, &problem))
      c.fail("cluster.coordinator", problem + " (got " + quoteString(cl.coordinator) + ")");
  }
  // Under a launcher the token may come from the launch, the ranks from its processes.
  if (!under_launcher || !cl.token.empty() || !cl.token_file.empty() || c.given("cluster.token") ||
      c.given("cluster.token_file"))
    checkClusterToken(c, cl);
  if (cl.from != "tf_config" && (!under_launcher || !cl.hosts.empty() || c.given("cluster.hosts")))
    checkClusterHosts(c, cl);
}

// The keys that mean something on one host too (isOneHostClusterKey).
void checkClusterTimesAndPolicy(const Checker& c, const ClusterSection& cl) {
  c.positive("cluster.join_timeout_s", cl.join_timeout_s);
  c.positive("cluster.heartbeat_interval_s", cl.heartbeat_interval_s);
  c.positive("cluster.heartbeat_timeout_s", cl.heartbeat_timeout_s);
  c.positive("cluster.collective_timeout_s", cl.collective_timeout_s);
  c.intRange("cluster.max_restarts", cl.max_restarts, 0, 1000000);
  c.positive("cluster.restart_window_s", cl.restart_window_s);
  c.nonNegative("cluster.host_cooldown_s", cl.host_cooldown_s);
  // Reported at whichever of the two was written, in terms of that one.
  if (!(cl.heartbeat_interval_s < cl.heartbeat_timeout_s)) {
    if (c.given("cluster.heartbeat_interval_s") || !c.given("cluster.heartbeat_timeout_s"))
      c.fail("cluster.heartbeat_interval_s",
             "must be < heartbeat_timeout_s (got " + formatFloat(cl.heartbeat_interval_s) +
                 ", heartbeat_timeout_s " + formatFloat(cl.heartbeat_timeout_s) + ")");
    c.fail("cluster.heartbeat_timeout_s",
           "must be > heartbeat_interval_s (got " + formatFloat(cl.heartbeat_timeout_s) +
               ", heartbeat_interval_s " + formatFloat(cl.heartbeat_interval_s) + ")");
  }
}

}  // namespace

void validateJob(const JobConfig& job, bool under_launcher) {
  Checker c(job);
  checkJobSection(c, job.job);
  checkModel(c, job.model);
  checkData(c, job.data);
  checkTrain(c, job.train);
  checkPrecision(c, job);
  checkOptimizer(c, job.optimizer);
  checkSchedule(c, job.schedule, job.optimizer.lr);
  checkStrategy(c, job.strategy, job.cluster, under_launcher);
  checkSharded(c, job.strategy, job.job);
  checkMemoryLimit(c, job.strategy, job.job);
  checkCluster(c, job.cluster, under_launcher);
  checkClusterTimesAndPolicy(c, job.cluster);
  checkElastic(c, job.cluster, job.strategy, under_launcher);
}

}  // namespace dtrain
