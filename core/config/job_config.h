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
  std::string name;     // default: the job file's stem
  std::string run_dir;  // default: "runs/<name>"
  uint64_t seed = 42;
  int threads = 0;             // compute threads; 0 = one per core
  std::string device = "cpu";  // "auto" (cuda when a GPU is visible) | "cpu" | "cuda"
  // The arithmetic (core/nn/precision.h): "fp32" (exact fp32, the GPU's
  // matches the CPU's) | "tf32" (GPU matrix products on tensor cores: faster,
  // ~3 decimal digits) | "bf16" | "fp16" (mixed precision: activations and
  // their gradients in 16 bits, products summed in fp32; weights, their
  // gradients, optimizer state and checkpoints fp32; fp16 with loss scaling,
  // [train] loss_scale_*). On a GPU 16-bit tensors and tensor-core
  // products; on the CPU a reference path (the fp32 kernels on values
  // rounded to the format).
  std::string precision = "fp32";
  // The memory one worker process may use, in MB: a run that would need
  // more (strategies/worker_memory.h) is refused before it starts. 0: the
  // memory cgroup's limit when one is set, else none.
  double memory_limit_mb = 0;
  // precision = "bf16" on the CPU: "auto" takes the AVX512-BF16 level where
  // the CPU has it and the reference path elsewhere, saying which at start;
  // "require" refuses to start on a host whose CPU kernels lack AVX512-BF16.
  std::string cpu_bf16 = "auto";
  // GPU: only deterministic convolution algorithms are candidates, so a run
  // and its resumes repeat bit for bit (the algorithms chosen are kept in the
  // run directory); false lets the fastest, atomics-summing ones compete too.
  bool deterministic = true;
  // GPU: the most workspace one library call (a convolution pass, a matrix
  // product) may use; faster algorithms needing more are passed over.
  int gpu_workspace_mb = 1024;
  // GPU, one process: each full-sized training step is recorded once as a
  // CUDA graph and replayed (one launch per step instead of one per kernel),
  // bitwise the same as running it call by call.
  bool cuda_graphs = true;
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
  std::string preset;  // "mlp" | "cnn" | "resnet" | "mobilenet_v2" | "gpt" | "" when `layers` is given
  std::vector<int64_t> hidden = {512, 256};  // mlp: widths of the hidden dense layers
  double dropout = 0.0;                      // mlp: dropout after each hidden relu (0 = none)
  std::string init = "he";                   // "he" | "glorot": weight initialisation
  // resnet: 20, 32, 56 (CIFAR-style, 6n+2 layers: 3 stages of 16/32/64 filters)
  // or 18, 34 (basic blocks), 50, 101, 152 (bottleneck blocks): torchvision's
  // ImageNet-style ResNets, for larger images
  int64_t depth = 20;
  double width = 1.0;  // mobilenet_v2: width multiplier of every layer's channels
  // gpt (models/gpt_preset.h): blocks (the key `layers = N`), attention heads,
  // model width (a multiple of heads) and positions.
  int64_t blocks = 6;
  bool blocks_given = false;  // `layers = N` was written
  int64_t heads = 6;
  int64_t dim = 384;
  int64_t context = 256;
  // gpt: the embedding's and output's vocabulary; 0 = the dataset's. Larger
  // pads it (to a multiple of 64, say, for faster products): the padded ids
  // take no probability and count in no loss.
  int64_t vocab = 0;
  bool tie_embeddings = true;     // gpt: the output layer's weight is the token embedding's table (GPT-2)
  std::vector<LayerSpec> layers;  // explicit layer list (instead of a preset)
};

struct DataSection {
  // "fashion_mnist" | "idx" | "cifar10" | "cifar100" | "image_folder" | "synthetic",
  // or for language models "tokens" | "text" (datasets/token_windows.h)
  std::string dataset = "fashion_mnist";
  // idx / fashion_mnist: a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // synthetic: generated, seeded, learnable data
  int64_t train_samples = 6000;
  int64_t test_samples = 1000;
  std::vector<int64_t> shape = {1, 28, 28};  // synthetic sample shape [C,H,W]
  int64_t classes = 10;
  bool shuffle = true;  // seeded shuffle each epoch
  int prefetch = 2;     // batches prepared ahead on the loader thread
  // Threads decoding samples for the loader; 0 = one per core. Matters for
  // image_folder (JPEG/PNG decoding); in-memory datasets need one.
  int loader_threads = 0;
  // GPU runs on datasets held as bytes: when the training split's bytes fit
  // in this many MiB of device memory they are copied there once, and each
  // step sends only its sample indices. -1 = a quarter of the GPU's free
  // memory when the run starts (the rest stays for the model); 0 = off (each
  // batch's bytes cross).
  int64_t device_cache_mb = -1;

  // image_folder: `dir` holds one sub-directory per class (sorted names = class
  // indices). The validation split is the folder `validation_dir` (same class
  // names) when set, else a seeded `validation_fraction` of `dir`'s images.
  std::string validation_dir;
  double validation_fraction = 0.1;
  uint64_t split_seed = 0;
  std::vector<int64_t> image_size = {224, 224};  // [height, width] every image is resized to
  int64_t channels = 3;                          // 3 = RGB, 1 = grey
  std::string bad_images = "skip";               // unreadable images: "skip" (reported) | "fail"

  // tokens / text: `files` (a path or glob) is the training corpus; the
  // validation split is `validation_files` when set, else the last
  // validation_fraction of `files`' tokens. Samples are windows of `context`
  // tokens, each position labelled with the token after it. tokens: llm.c's
  // token files or headerless uint16 files, every id checked against `vocab`
  // (GPT-2's 50257 by default); text: one token per byte, vocab 256.
  std::string files;
  std::string validation_files;
  int64_t context = 256;
  int64_t vocab = 50257;
  // A token id that pads sequences: as a label it counts in neither the loss
  // nor the figures (-1 = none).
  int64_t pad_id = -1;

  // Per-channel normalisation (x - mean) / std of the [0,1] pixels, any
  // dataset; empty = none. One value applies to every channel.
  std::vector<double> mean;
  std::vector<double> std;

  // Train-time augmentation (training split only; each sample's draw depends
  // on the seed, the epoch and its index, so a resumed run sees the same).
  bool augment_flip = false;                             // random horizontal flip
  int64_t augment_crop_padding = 0;                      // pad by this many zeros, then crop back at random
  bool augment_resized_crop = false;                     // random area/aspect crop, resized to the image size
  std::vector<double> augment_scale = {0.08, 1.0};       // resized crop: area fraction range
  std::vector<double> augment_ratio = {0.75, 1.333333};  // resized crop: aspect ratio range
};

struct TrainSection {
  int64_t epochs = 10;       // train for this many epochs ...
  int64_t steps = 0;         // ... or this many steps, when > 0 (then epochs is ignored)
  int64_t batch_size = 128;  // samples of one micro-step, all workers together
  // Micro-steps per update: their gradients add up before the one update,
  // the mathematics of a batch accumulate x batch_size (updateBatch()) while
  // the activations held are those of batch_size.
  int64_t accumulate = 1;
  int64_t eval_batch_size = 1000;
  int64_t eval_every_steps = 0;  // 0 = off
  bool eval_every_epoch = true;
  int64_t checkpoint_every_steps = 0;  // 0 = off
  bool checkpoint_every_epoch = true;
  int64_t keep_last = 3;           // checkpoints kept on disk
  double log_every_seconds = 5.0;  // plain progress lines when not on a terminal
  double grad_clip_norm = 0.0;     // 0 = no clipping
  double label_smoothing = 0.0;    // target = (1-s) one-hot + s/classes; in [0, 1)
  // precision = "fp16": dynamic loss scaling. The loss, and so every
  // gradient, is multiplied by the scale; a step whose gradients hold an inf
  // or a NaN is skipped (no update; logged and counted in metrics.jsonl) and
  // the scale multiplied by the backoff; after growth_interval finite steps
  // in a row it is multiplied by the growth. Other precisions ignore them.
  double loss_scale_initial = 65536;
  int64_t loss_scale_growth_interval = 2000;
  double loss_scale_backoff = 0.5;
  double loss_scale_growth = 2.0;

  // The samples of one update, all workers together: what the loader's
  // global batches hold, what a step's gradient is the mean over.
  int64_t updateBatch() const { return batch_size * accumulate; }
};

struct OptimizerSection {
  std::string type = "sgd";  // "sgd" | "adam" | "adamw"
  double lr = 0.05;
  double momentum = 0.9;      // sgd
  bool nesterov = false;      // sgd
  double weight_decay = 0.0;  // sgd/adam: L2 added to the gradient; adamw: decoupled
  // adamw: its decay applies to matrices (dense and convolution kernels)
  // only, unless these add the 1-D tensors (biases, normalisation scales and
  // shifts) or the embedding tables.
  bool decay_1d = false;
  bool decay_embeddings = false;
  double beta1 = 0.9;  // adam/adamw
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct ScheduleSection {
  std::string type = "constant";  // "constant" | "step" | "cosine"
  int64_t warmup_steps = 0;       // linear warm-up from 0 in front of any schedule
  int64_t step_every = 1000;      // step: multiply by gamma every this many steps
  double gamma = 0.1;
  double min_lr = 0.0;  // cosine: floor reached at the last step
};

struct StrategySection {
  // "one_device": one process. "mirrored": one host, `workers` processes.
  // "multi_worker_mirrored": the hosts of [cluster], each with its slots.
  // "central_storage": one host, `workers` processes, the update on rank 0.
  // "parameter_server": `workers` processes and `ps` shards on one host.
  // "pipeline": the model's layers split into stages (below).
  // "sharded": data parallelism whose training state is split across the
  // workers (ZeRO; `stage`), on one host (`workers`) or the hosts of [cluster].
  std::string type = "one_device";
  // mirrored, central_storage, parameter_server: worker processes on this host (CPU slots or GPUs)
  int workers = 2;
  int ps = 1;  // parameter_server: shard processes holding the variables (beside the workers)
  // parameter_server: "sync" (a shard applies update t once every worker's
  // push of t is in) | "async" (each push applied as it arrives) |
  // "bounded" (async, but no worker runs more than `staleness` updates
  // ahead of the slowest).
  std::string consistency = "sync";
  int staleness = 2;
  // async, bounded: a push k updates late moves the parameters by lr / (1 + k).
  bool scale_lr_by_staleness = false;
  // parameter_server: the fewest workers the run goes on with when workers
  // other than the chief are lost (async, bounded: their remaining samples
  // go to the survivors; sync: their slices of every global batch, the
  // update under way included); one loss more stops it. Not with sync and
  // sync_batchnorm, which stop at the first loss, as mirrored does.
  int min_workers = 1;
  // parameter_server, sync: when a worker's gradient leaves for the shards:
  // "during_backward" (in the buckets of bucket_mb, as they are ready) |
  // "after_backward" (whole) | "auto" (during backward on CPU workers; GPU
  // workers push whole after backward).
  std::string gradient_push = "auto";
  // "auto" (shared memory when every rank is on one host; across hosts the
  // hierarchy when a host runs several ranks, else Gloo by size) |
  // "shared_memory" | "hierarchical" (shared memory inside each host, Gloo
  // between one leader per host) | "ring" | "halving_doubling" | "bcube" (Gloo)
  std::string collective = "auto";
  double bucket_mb = 4.0;  // gradients are all-reduced in buckets of this size,
                           // overlapped with the rest of backward
  // Who carries the collectives of GPU runs: "auto" (NCCL when every rank of
  // a host has a GPU of its own, else Gloo staged through host memory) |
  // "nccl" | "gloo". CPU runs always use shared memory or Gloo.
  std::string backend = "auto";
  // Batch-norm statistics: per rank (false: each rank normalises by its own
  // slice of the batch, as tf.distribute and DDP do) or over the global batch.
  bool sync_batchnorm = false;
  // sharded: 1 (each worker keeps and updates 1/N of the optimizer state) |
  // 2 (and of the summed gradients) | 3 (and of the parameters).
  int stage = 2;
  // pipeline: the model cut into `stages` stages, one process each, times
  // `replicas` data-parallel copies of the pipeline (stages x replicas
  // processes on this host). `stages = N` splits automatically, balancing
  // the layers' predicted cost; [[strategy.stages]] layers = [...] names
  // each stage's layers instead (then stages is their count).
  int stages = 2;
  std::vector<std::vector<std::string>> stage_layers;  // per stage, when named
  // Each replica's share of the global batch is cut into this many
  // micro-batches (1: model parallelism, no pipelining).
  int micro_batches = 4;
  std::string schedule = "1f1b";  // "1f1b" | "gpipe"
  int replicas = 1;
  // The automatic split's memory limit per stage, in MB: its parameters,
  // their gradients and optimizer state, and the activations of the
  // micro-batches it holds at once. 0: no limit (the split balances time,
  // and among splits within 2% of the fastest takes the least memory).
  double stage_memory_mb = 0;
  // What the automatic split balances: "time" (each layer's forward and
  // backward timed on a micro-batch when the run starts) | "flops" (counted:
  // no timing pass, the same split on every run).
  std::string split_by = "time";
  // The automatic split is re-planned once, after this many steps, from the
  // time each stage measured running beside the others (the layers were
  // timed alone); the cuts move when the slowest stage gains. 0: never.
  int rebalance_after_steps = 3;
};

// The training processes a one-host job of this strategy starts: `workers`,
// or a pipeline's stages x replicas (a parameter server's shards come on top).
inline int trainingProcesses(const StrategySection& s) {
  return s.type == "pipeline" ? s.stages * s.replicas : s.workers;
}

// One host of a multi-host run: [[cluster.hosts]] or hosts = [{ address = ..., slots = ... }].
struct ClusterHost {
  std::string address;  // how the other hosts reach it (IP or name, no port); also where its workers listen
  int slots = 1;        // worker processes on it (one per GPU, or CPU slots)
  // parameter_server: shard processes on it besides its workers; -1 (not
  // given on any host): [strategy] ps shards on node 0.
  int ps = -1;
  SourcePos pos;  // the entry's table; its keys are in JobConfig::positions as "cluster.hosts[i].slots"
};

// [cluster]: who takes part and how they meet. Absent = a single-host run.
// The [cluster] keys that mean something on one host too: the timeouts and
// in-job recovery. A [cluster] of only these leaves the job on one host (its
// workers meet over loopback); any other key says where the hosts are.
bool isOneHostClusterKey(const std::string& key);

struct ClusterSection {
  // The job runs on hosts that [cluster] names: the table has a key other
  // than the one-host keys above, or is empty (or a --set gave such a key).
  bool present = false;
  // Where the hosts and coordinator come from: "" (TF_CONFIG when it is set
  // in the environment, else the keys below) | "tf_config" (TF_CONFIG, which
  // must be set; coordinator and hosts are then not given) | "job" (the keys
  // below; TF_CONFIG is ignored). See tf_config_plan.h.
  std::string from;
  std::string coordinator;  // "host:port" of the rendezvous (served by node 0's dtrain)
  // The shared secret every worker must present: exactly one of token and token_file.
  // The resolved job (jobToToml) writes token as "<hidden>", never in clear; see cluster_token.h.
  std::string token;
  std::string token_file;          // a file holding it on its first line (relative paths: to the working dir)
  std::vector<ClusterHost> hosts;  // node i = hosts[i]; ranks are numbered host by host
  double join_timeout_s = 300;     // how long the coordinator waits for every worker to join
  double heartbeat_interval_s = 1;
  double heartbeat_timeout_s = 10;    // a peer silent this long is declared lost
  double collective_timeout_s = 300;  // deadline of one collective call
  // In-job recovery (mirrored, multi_worker_mirrored): when a worker or a host
  // is lost, the survivors re-form the group and go on from their memory, and
  // a replacement started with the same command joins at a step boundary.
  // Off by default: a recovered run equals an uninterrupted one up to float
  // rounding (its sums run over another number of ranks), not bit for bit, and
  // it keeps going on fewer workers (slower) where a stopped run would tell
  // someone; a job says it wants that.
  bool elastic = false;
  // Regroups after losses allowed within restart_window_s; one more stops the
  // run with a checkpoint (a regroup that only takes in replacements does not count).
  int max_restarts = 3;
  double restart_window_s = 600;
  // A host that lost workers twice within restart_window_s is left out this long.
  double host_cooldown_s = 60;
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
  ClusterSection cluster;
  // Where each set key came from ("optimizer.lr" -> job.toml:12:5), for validator messages.
  std::map<std::string, SourcePos> positions;

  // Position of a key for messages; the job file itself when the key was defaulted.
  SourcePos posOf(const std::string& dotted_key) const;
};

}  // namespace dtrain
