#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <thread>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cpu/cpu_level.h"
#include "core/backend/device_memory.h"
#include "core/errors.h"
#include "core/io/crc32.h"
#include "core/io/tensorboard_writer.h"
#include "core/nn/layer_registry.h"
#include "core/optim/loss_scaler.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/train/checkpoint.h"
#include "core/train/device_choice.h"
#include "core/train/evaluate.h"
#include "core/train/metrics_log.h"
#include "core/train/model_checkpoint.h"
#include "core/train/progress.h"
#include "core/train/replica_set.h"
#include "core/train/resume_point.h"
#include "core/train/step_profile.h"
#include "core/train/stop_signal.h"
#include "core/train/strategy.h"
#include "core/train/weight_decay_mask.h"
#include "core/util/process_memory.h"
#include "core/util/rng.h"
#include "datasets/batch_loader.h"
#include "datasets/byte_batches.h"
#include "datasets/dataset.h"
#include "datasets/sampler.h"

namespace dtrain {

int resolveThreads(int configured) {
  if (configured > 0) return configured;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

namespace {

// A step whose figures are not yet reduced, logged and shown.
struct PendingStep {
  int64_t step = 0, epoch = 0, step_in_epoch = 0;
  double lr = 0, seconds = 0;
  int stop = 0;  // stopRequested() when the step had been queued
  StepFigures figures;
  double finished_at = 0;  // unixTime() when step() returned
};

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// "updates of 64 samples in 4 micro-batches of 16, " for the start-up line;
// nothing without accumulation.
std::string describeAccumulation(const TrainSection& train) {
  if (train.accumulate == 1) return "";
  return "updates of " + std::to_string(train.updateBatch()) + " samples in " +
         std::to_string(train.accumulate) + " micro-batches of " + std::to_string(train.batch_size) + ", ";
}

}  // namespace

struct Trainer::Impl {
  JobConfig job;
  TrainerOptions opt;
  Device device;
  std::shared_ptr<Strategy> strategy;
  std::unique_ptr<Dataset> train_data, test_data;
  // GPU: the algorithms the layers timed, kept in the run directory for a resume.
  std::unique_ptr<AlgorithmCache> algorithms;
  std::unique_ptr<ReplicaSet> replicas;
  std::unique_ptr<Optimizer> optimizer;
  LossScaler loss_scaler;  // fp16's; off otherwise
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<BatchLoader> loader;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;  // chief only, like metrics
  std::unique_ptr<ProgressDisplay> progress;
  TrainState state;
  int64_t steps_per_epoch = 0, total_steps = 0, epochs = 0;
  int64_t last_checkpoint_step = -1, last_eval_step = -1;
  int64_t trained_epoch = 0;  // the epoch the latest step belonged to (for eval lines)
  std::string last_checkpoint;
  EvalResult last_eval;
  TrainingParts parts;                       // what the strategy trains with (attached again after a regroup)
  int64_t graph_replays = 0;                 // counted by the strategy's recorded steps
  BatchForm batch_form = BatchForm::Floats;  // the training loader's (planDeviceBatches)
  std::string batch_plan;                    // planDeviceBatches' line for the log

  bool chief() const { return strategy->isChief(); }
  // Rank 0 speaks for the run; the others stay quiet unless something fails.
  bool quiet() const { return opt.quiet || !chief(); }

  // A stop (SIGINT/SIGTERM) seen by any rank, agreed on by all at the end of
  // a step so every rank stops after the same one.
  int stop_signal = 0;
  int stopping() const { return strategy->worldSize() == 1 ? stopRequested() : stop_signal; }

  // A language model's figures are per token; a byte-level one's tokens are bytes.
  void markTokens(MetricsRecord& r) const {
    r.tokens = replicas->labelsPerSample() > 1;
    r.byte_tokens = r.tokens && job.data.dataset == "text";
  }

  void say(const std::string& line) {
    if (quiet()) return;
    progress->line(line);
  }

  void setUp(const LoadedCheckpoint* resume) {
    device = computeDevice(job.job, opt.local_index);
    job.job.threads = resolveThreads(job.job.threads);
    strategy = opt.strategy;
    if (!strategy) throw Error("Trainer: no strategy given (TrainerOptions::strategy)");
    // The trainer's is the only reference: a regroup drops the strategy, and its group with it.
    opt.strategy.reset();
    train_data = openDataset(job.data, Split::Train, job.job.seed);
    test_data = openDataset(job.data, Split::Test, job.job.seed);
    // Every rank reads the chief's algorithm choices where it can reach the
    // run directory; a measurement (bench) neither reads nor writes them.
    if (!device.isCpu())
      algorithms = std::make_unique<AlgorithmCache>(
          opt.profile ? "" : (std::filesystem::path(job.job.run_dir) / kAlgorithmCacheFileName).string());
    // A GPU runs one replica; the CPU one per compute thread. A strategy
    // whose ranks each compute a part of the model keeps the whole of it in
    // host memory, for checkpoints, off the GPU its part needs.
    const Device whole_device = strategy->keepsWholeModelOnHost() ? Device::cpu() : device;
    const GpuLayerOptions gpu_layers = gpuLayerOptions(job.job, algorithms.get());
    replicas = std::make_unique<ReplicaSet>(job.model, train_data->sampleShape(), train_data->classes(),
                                            builtinLayers(), device.isCpu() ? job.job.threads : 1,
                                            job.train.batch_size, whole_device, gpu_layers);
    replicas->setMicroBatches(job.train.accumulate);
    replicas->setLabelSmoothing(static_cast<float>(job.train.label_smoothing));
    replicas->setPrecision(precisionNamed(job.job.precision));
    if (opt.profile) {
      opt.profile->attach(replicas->model(), device, describeDevice(device));
      replicas->setProfile(opt.profile);
    }
    optimizer = makeOptimizer(job.optimizer);
    // A sharded run's workers keep their shards of the state (the strategy's);
    // a resume's chief reads the whole of it, which attach shares out.
    const bool sharded = strategy->shardsState();
    optimizer->init(sharded && !(resume && chief()) ? 0 : replicas->store().size(), whole_device);
    optimizer->setDecayMask(weightDecayMask(replicas->store(), job.optimizer));
    loss_scaler = LossScaler(job);
    if (state.loss_scale > 0)  // a checkpoint of an fp16 run (a resume in fp16 goes on from it)
      loss_scaler.restore({state.loss_scale, state.loss_scale_good_steps, state.skipped_steps});
    if (opt.fault_overflow_at_step > 0) loss_scaler.overflowAt(opt.fault_overflow_at_step);
    if (resume) {
      restoreCheckpoint(*resume, replicas->store(), replicas->buffers(), optimizer.get());
    } else {
      replicas->store().initialize(job.job.seed);
    }
    shareChiefState();
    // Before the strategy, which may have something to say.
    progress = std::make_unique<ProgressDisplay>(opt.out, opt.terminal, job.train.log_every_seconds,
                                                 replicas->labelsPerSample() > 1 ? "tok/s" : "img/s");
    parts = TrainingParts{};
    parts.job = &job;
    parts.device = device;
    parts.replicas = replicas.get();
    parts.optimizer = optimizer.get();
    parts.loss_scaler = &loss_scaler;
    parts.gpu_layers = gpu_layers;
    parts.profile = opt.profile;
    parts.say = [this](const std::string& line) { say(line); };
    parts.graph_replays = &graph_replays;
    parts.updates_done = state.step;
    sampler = std::make_unique<Sampler>(train_data->size(), job.job.seed, job.data.shuffle);
    if (!whole_device.isCpu()) planDeviceBatches();
    makeLoader();
    steps_per_epoch = loader->batchesPerEpoch();
    parts.batches_per_epoch = steps_per_epoch;
    parts.slice_loader = [this](Shard shard) {
      LoaderOptions o = loaderOptionsFor(job.data, *train_data, Split::Train, job.job.seed, shard, false);
      o.prefetch = 0;
      return std::make_unique<BatchLoader>(*train_data, *sampler, job.train.updateBatch(), std::move(o));
    };
    strategy->attach(parts);

    if (job.train.steps > 0) {
      total_steps = job.train.steps;
      epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
    } else {
      epochs = job.train.epochs;
      total_steps = epochs * steps_per_epoch;
    }
    if (opt.profile) return;  // a measurement: nothing is written
    // Only rank 0 writes there (other hosts need not share the file system).
    if (chief()) std::filesystem::create_directories(job.job.run_dir);
    if (chief()) metrics = std::make_unique<MetricsLog>(job.job.run_dir, resume ? state.step : -1);
    if (chief())
      tensorboard = std::make_unique<TensorBoardWriter>(
          (std::filesystem::path(job.job.run_dir) / "tensorboard").string(), resume ? state.step : -1);
    if (algorithms)
      for (const std::string& note : algorithms->takeNotes()) say("warning: " + note);
  }

  // A GPU replica set: whether its training batches cross as floats, as
  // bytes, or as indices into the training split kept on the device
  // (datasets/byte_batches.h); before the first step, as the cache's budget
  // is a share of the memory free then.
  void planDeviceBatches() {
    GpuBatchPlan plan = planGpuBatches(job.data, *train_data, Augmentation::fromConfig(job.data),
                                       replicas->freeDeviceBytes());
    // A byte batch's transforms address its own rows, so the micro-batches
    // of an accumulating run are cut from floats instead.
    if (plan.form == BatchForm::Bytes && job.train.accumulate > 1)
      plan = {BatchForm::Floats,
              "training batches cross to the GPU as floats (cut into micro-batches: "
              "[train] accumulate; keep the split on the GPU with data.device_cache_mb)"};
    if (plan.form != BatchForm::Floats)
      replicas->useByteBatches(plan.form, *train_data->byteImages(),
                               Normalisation::fromConfig(job.data, train_data->sampleShape()[0]));
    batch_form = plan.form;
    batch_plan = plan.description;
  }

  // This worker's slice of every global batch, as the strategy shares them out.
  void makeLoader() {
    loader.reset();  // its thread first
    LoaderOptions o =
        loaderOptionsFor(job.data, *train_data, Split::Train, job.job.seed, strategy->dataShard(),
                         /*pinned=*/!device.isCpu());
    o.form = batch_form;
    loader = std::make_unique<BatchLoader>(*train_data, *sampler, job.train.updateBatch(), std::move(o));
  }

  // Algorithms timed since the last call go to the run directory at once, so
  // a run killed after its first step resumes with them. A write that fails
  // costs a resume only the timing, so it is reported, not fatal.
  void saveAlgorithms() {
    if (!algorithms || !chief()) return;
    try {
      algorithms->save();
    } catch (const IoError& e) {
      say(std::string("warning: ") + e.what() + "; a resume will time the GPU algorithms again");
    }
  }

  // Ranks built from different job files or program versions would exchange
  // gradients of different tensors: compare the parameter tables first.
  void checkSameLayout() {
    std::string table;
    for (const ParamEntry& e : replicas->store().entries()) table += e.name + e.shape.str() + ";";
    char mine[64];
    std::snprintf(mine, sizeof mine, "%08x (%lld parameters)", crc32Update(0, table.data(), table.size()),
                  static_cast<long long>(replicas->store().count()));
    char chiefs[64];
    std::snprintf(chiefs, sizeof chiefs, "%s", mine);
    strategy->broadcastFromChief(chiefs, sizeof chiefs);
    if (std::string(chiefs) != mine)
      throw CommError("parameter layouts differ: rank " + std::to_string(strategy->rank()) + " has " + mine +
                      ", rank 0 has " + chiefs +
                      "; start every worker from the same job file and dtrain build");
  }

  // Every rank starts from the chief's weights, buffers, optimizer state and
  // position (on a resume only the chief has read the checkpoint).
  void shareChiefState() {
    if (strategy->worldSize() > 1) checkSameLayout();
    strategy->broadcastParameters(replicas->store().params().data(), replicas->store().size());
    replicas->paramsChangedElsewhere();  // a GPU's 16-bit copy is cast again from them
    if (replicas->buffers().size() > 0)
      strategy->broadcastParameters(replicas->buffers().params().data(), replicas->buffers().size());
    if (strategy->worldSize() == 1) return;
    if (!strategy->shardsState())
      for (auto& [name, buffer] : optimizer->stateBuffers())
        if (buffer->numel() > 0) strategy->broadcastParameters(buffer->data(), buffer->numel());
    LossScaleState scale = loss_scaler.state();
    int64_t where[9] = {state.step, state.epoch, state.position,   last_checkpoint_step, last_eval_step,
                        catch_up,   0,           scale.good_steps, scale.skipped_steps};
    std::memcpy(&where[6], &scale.scale, sizeof scale.scale);
    strategy->broadcastFromChief(where, sizeof where);
    state.step = where[0];
    state.epoch = where[1];
    state.position = where[2];
    last_checkpoint_step = where[3];
    last_eval_step = where[4];
    catch_up = where[5];
    std::memcpy(&scale.scale, &where[6], sizeof scale.scale);
    scale.good_steps = where[7];
    scale.skipped_steps = where[8];
    loss_scaler.restore(scale);  // one scale on every worker
  }

  void checkpoint(const char* why) {
    if (state.step == last_checkpoint_step) return;
    // Collective: before the others leave (workers at their own pace keep the chief's).
    if (strategy->lockstep()) strategy->agreeOnBuffers(replicas->buffers());
    // A sharded state streams from every worker to the chief's files.
    std::vector<NamedTensorView> streamed;
    if (strategy->shardsState()) streamed = strategy->stateViews(replicas->store());
    if (!chief()) {  // the chief writes; the others only keep count
      takePartInStreamedWrite(streamed);
      last_checkpoint_step = state.step;
      return;
    }
    strategy->collectState(replicas->store(), *optimizer);
    const LossScaleState& scale = loss_scaler.state();
    state.loss_scale = loss_scaler.enabled() ? scale.scale : 0;
    state.loss_scale_good_steps = scale.good_steps;
    state.skipped_steps = scale.skipped_steps;
    last_checkpoint = saveCheckpoint(job, state, replicas->store(), replicas->buffers(), *optimizer,
                                     strategy->shardsState() ? &streamed : nullptr);
    saveAlgorithms();  // with those an evaluation timed
    if (tensorboard) tensorboard->flush();
    last_checkpoint_step = state.step;
    say("checkpoint " + std::filesystem::path(last_checkpoint).filename().string() + " (" + why + ")");
  }

  // Each worker's peak resident memory so far ("peak_rss_mb_rank1": 812.4),
  // summed into place over the workers that evaluate together (collective).
  void recordPeakMemory(MetricsRecord& r) {
    const bool together = strategy->evaluatesTogether() && strategy->worldSize() > 1;
    std::vector<double> peaks(static_cast<size_t>(together ? strategy->worldSize() : 1), 0.0);
    peaks[together ? static_cast<size_t>(strategy->rank()) : 0] =
        static_cast<double>(residentMemory().peak_bytes) / (1 << 20);
    if (together) strategy->reduceFigures(peaks.data(), static_cast<int64_t>(peaks.size()));
    for (size_t k = 0; k < peaks.size(); ++k)
      r.extra.emplace_back("peak_rss_mb_rank" + std::to_string(together ? k : strategy->rank()), peaks[k]);
  }

  void evaluate() {
    if (state.step == last_eval_step) return;
    if (strategy->lockstep()) strategy->agreeOnBuffers(replicas->buffers());
    if (!strategy->evaluatesTogether() && !chief()) {  // the chief evaluates alone
      last_eval_step = state.step;
      return;
    }
    if (strategy->evaluatesBatches()) {
      Strategy* ranks = strategy.get();
      last_eval =
          evaluateDataset([ranks](const Batch& b) { return ranks->evaluateBatch(b); }, !device.isCpu(),
                          *test_data, job.train.eval_batch_size, job.data, ranks->dataShard(),
                          [ranks](double* v, int64_t n) { ranks->reduceFigures(v, n); });
    } else if (strategy->evaluatesTogether()) {
      Strategy* ranks = strategy.get();
      last_eval = evaluateDataset(*replicas, *test_data, job.train.eval_batch_size, job.data,
                                  Shard{strategy->rank(), strategy->worldSize()},
                                  [ranks](double* v, int64_t n) { ranks->reduceFigures(v, n); });
    } else {
      last_eval =
          evaluateDataset(*replicas, *test_data, job.train.eval_batch_size, job.data, Shard{0, 1}, {});
    }
    last_eval_step = state.step;
    if (last_eval.accuracy > state.best_test_accuracy) state.best_test_accuracy = last_eval.accuracy;
    MetricsRecord r;
    r.step = state.step;
    r.epoch = trained_epoch;
    r.split = "test";
    r.loss = last_eval.loss;
    r.accuracy = last_eval.accuracy;
    r.samples = last_eval.samples;
    r.images_per_s = last_eval.seconds > 0 ? last_eval.samples / last_eval.seconds : 0;
    markTokens(r);
    recordPeakMemory(r);
    if (metrics) metrics->write(r);
    if (tensorboard)
      tensorboard->scalars(state.step, {{"test/loss", static_cast<float>(last_eval.loss)},
                                        {"test/accuracy", static_cast<float>(last_eval.accuracy)},
                                        {"test/images_per_s", static_cast<float>(r.images_per_s)}});
    char buf[256];
    if (r.tokens) {
      char bits[40] = "";
      if (r.byte_tokens) std::snprintf(bits, sizeof bits, "  bits/byte %.4f", last_eval.loss / std::log(2.0));
      std::snprintf(
          buf, sizeof buf,
          "eval  step %lld  test loss %.4f  perplexity %.3f%s  accuracy %.4f  (%lld tokens, %.1f s)",
          static_cast<long long>(state.step), last_eval.loss, std::exp(last_eval.loss), bits,
          last_eval.accuracy, static_cast<long long>(last_eval.samples), last_eval.seconds);
    } else {
      std::snprintf(buf, sizeof buf, "eval  step %lld  test loss %.4f  accuracy %.4f  (%lld samples, %.1f s)",
                    static_cast<long long>(state.step), last_eval.loss, last_eval.accuracy,
                    static_cast<long long>(last_eval.samples), last_eval.seconds);
    }
    say(buf);
  }

  // The loader's next batch; a profile hears how long the host waited for it.
  bool nextBatch(Batch& batch) {
    if (!opt.profile) return loader->next(batch);
    opt.profile->stepBegins();
    const auto asked = std::chrono::steady_clock::now();
    const bool got = loader->next(batch);
    opt.profile->addWait(HostWait::Data, secondsSince(asked));
    return got;
  }

  // An elastic run (TrainerOptions::regroup).
  bool elastic() const { return static_cast<bool>(opt.regroup); }
  // After a regroup every rank, a replacement too, runs the evaluation and
  // checkpoint due at the step the group re-formed at, if not done yet.
  int64_t catch_up = 0;
  std::chrono::steady_clock::time_point last_replacement_poll{};
  // The latest step's line, kept on every rank: a chief lost after the step's
  // update but before writing it leaves it to the next.
  MetricsRecord last_train_record;

  // The chief asks for the ranks to re-form when replacements wait (at most once a second).
  bool replacementsWaiting() {
    if (!elastic() || !chief() || !opt.replacements_waiting) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_replacement_poll < std::chrono::seconds(1)) return false;
    last_replacement_poll = now;
    try {
      return opt.replacements_waiting();
    } catch (const CommError&) {
      return false;  // the group is over: the next collective says so
    }
  }

  // Whether an evaluation and a checkpoint are due at the step just taken.
  struct Due {
    bool eval = false, checkpoint = false;
  };
  Due dueAt(bool epoch_done, bool last_step) const {
    Due d;
    if (opt.profile) return d;
    d.eval = (job.train.eval_every_steps > 0 && state.step % job.train.eval_every_steps == 0) ||
             (epoch_done && job.train.eval_every_epoch) || last_step;
    d.checkpoint =
        (job.train.checkpoint_every_steps > 0 && state.step % job.train.checkpoint_every_steps == 0) ||
        (epoch_done && job.train.checkpoint_every_epoch) || last_step;
    return d;
  }
  void evaluateAndCheckpoint(const Due& due, bool epoch_done, bool last_step) {
    if (due.eval) evaluate();
    if (due.checkpoint) checkpoint(last_step ? "end" : epoch_done ? "epoch end" : "periodic");
  }

  // An elastic run after a collective failed (`why`) or the ranks agreed to
  // take in replacements: the group re-forms, every rank takes the chief's
  // state (its parameters, optimizer state, buffers and position: the
  // replicas are identical after every whole step), and the step that was
  // under way is redone from the position. A further failure meanwhile
  // starts it again.
  void regroup(std::string why) {
    int rank = strategy->rank();
    for (;;) {
      std::fprintf(stderr, "dtrain: rank %d: re-forming the group at step %lld: %s\n", rank,
                   static_cast<long long>(state.step), why.c_str());
      std::fflush(stderr);
      pending.clear();  // an elastic step's figures are settled as it ends
      strategy.reset();
      // A GPU's queued work finishes before the loader (whose pinned batches
      // the copies read) is made again; the redone step's figures start anew.
      if (!device.isCpu()) replicas->discardDeviceFigures();
      try {
        TrainerOptions::Regrouped r = opt.regroup();
        strategy = std::move(r.strategy);
        rank = strategy->rank();
        replicas->clearGradients();
        catch_up = 1;
        shareChiefState();
        parts.updates_done = state.step;
        strategy->attach(parts);
        makeLoader();
        if (chief() && !metrics) {  // the chief's process was lost: this one writes from now on
          metrics = std::make_unique<MetricsLog>(job.job.run_dir, state.step);
          tensorboard = std::make_unique<TensorBoardWriter>(
              (std::filesystem::path(job.job.run_dir) / "tensorboard").string(), state.step);
          if (metrics->lastStep() < state.step && last_train_record.step == state.step)
            metrics->write(last_train_record);
        }
        if (metrics) metrics->writeGeneration(state.step, r.generation, strategy->worldSize(), r.change);
        say("regrouped at step " + std::to_string(state.step) + ": " + r.change);
        if (!r.stop.empty()) {
          checkpoint("stopped");
          double done = 0;  // no rank leaves before the chief has written it
          strategy->reduceFigures(&done, 1);
          throw Error("the run stopped with a checkpoint at step " + std::to_string(state.step) + ": " +
                      r.stop);
        }
        return;
      } catch (const CommError& e) {
        why = e.what();
      }
    }
  }

  // Runs `body` (a step's collectives); on a failed collective in an elastic
  // run, regroups and returns false.
  template <typename Body>
  bool orRegroup(Body&& body) {
    if (!elastic()) {
      body();
      return true;
    }
    try {
      body();
      return true;
    } catch (const CommError& e) {
      regroup(e.what());
      return false;
    }
  }

  // After a regroup: what was due at this step and not yet done.
  void catchUp() {
    if (!catch_up) return;
    for (;;) {
      const bool epoch_done = state.position == 0 && state.step > 0;
      const bool last_step = state.step == total_steps;
      if (orRegroup([&] { evaluateAndCheckpoint(dueAt(epoch_done, last_step), epoch_done, last_step); }))
        break;
    }
    catch_up = 0;
  }

  // Dropout masks of the step about to run.
  uint64_t stepSeed() const { return dropoutSeedOf(job.job.seed, state.step); }

  // One optimizer update from the batch, as the strategy runs it; returns
  // its figures, or on a GPU that they are on their way.
  StepFigures step(const Batch& batch, double lr) {
    return strategy->step(
        StepInput{batch, lr, state.step + 1, stepSeed(), stopRequested(), replacementsWaiting()});
  }

  // The running sums of the epoch's steps settled so far, for the progress bar.
  struct EpochSums {
    double loss = 0, correct = 0, seen = 0;
  };
  EpochSums epoch_sums;
  std::deque<PendingStep> pending;  // queued steps whose figures are not yet settled, oldest first

  // Takes the oldest pending step's figures (a GPU's from its snapshot),
  // agrees on them and on a stop with the other ranks, and records and shows
  // them: metrics.jsonl, TensorBoard and the progress bar get each step's own.
  void settleOldest() {
    const PendingStep p = pending.front();
    pending.pop_front();
    BatchFigures f = p.figures.host;
    if (p.figures.on_device) {
      const auto waiting = std::chrono::steady_clock::now();
      f = replicas->takeDeviceFigures();
      if (opt.profile) opt.profile->addWait(HostWait::Device, secondsSince(waiting));
    }
    double figs[4] = {f.loss_sum, static_cast<double>(f.correct), static_cast<double>(f.samples),
                      static_cast<double>(p.stop)};
    if (p.figures.agreed)
      figs[3] = p.figures.stop;  // summed and agreed by the strategy
    else if (strategy->lockstep())
      strategy->reduceFigures(figs, 4);  // else this worker's own figures
    if (figs[3] > 0 && !stop_signal)
      stop_signal = p.stop ? p.stop : p.figures.agreed ? p.figures.stop : SIGTERM;
    epoch_sums.loss += figs[0];
    epoch_sums.correct += figs[1];
    epoch_sums.seen += figs[2];
    MetricsRecord r;
    r.step = p.step;
    r.epoch = p.epoch;
    r.split = "train";
    r.loss = figs[2] > 0 ? figs[0] / figs[2] : 0.0;  // 0 samples: a skipped step
    r.accuracy = figs[2] > 0 ? figs[1] / figs[2] : 0.0;
    r.images_per_s = p.seconds > 0 ? figs[2] / p.seconds : 0;
    r.lr = p.lr;
    r.samples = static_cast<int64_t>(figs[2]);
    markTokens(r);
    r.extra = p.figures.extra;
    r.time = p.finished_at;
    // A GPU's peak memory over the steps queued since the last line, for the
    // benchmarks: a span per line leaves the first steps' algorithm searches
    // out of the later lines.
    if (metrics && !device.isCpu())
      r.extra.emplace_back("device_peak_bytes", static_cast<double>(peakDeviceMemory(device)));
    last_train_record = r;
    if (metrics) metrics->write(r);
    if (tensorboard)
      tensorboard->scalars(p.step, {{"train/loss", static_cast<float>(r.loss)},
                                    {"train/accuracy", static_cast<float>(r.accuracy)},
                                    {"train/lr", static_cast<float>(p.lr)},
                                    {"train/images_per_s", static_cast<float>(r.images_per_s)},
                                    {"train/step_time_s", static_cast<float>(p.seconds)}});
    if (!quiet() && epoch_sums.seen > 0)
      progress->update(p.step_in_epoch, epoch_sums.loss / epoch_sums.seen,
                       epoch_sums.correct / epoch_sums.seen, static_cast<int64_t>(epoch_sums.seen));
  }

  void settleAll() {
    while (!pending.empty()) settleOldest();
  }

  TrainOutcome loop() {
    TrainOutcome out;
    LrSchedule schedule(job.schedule, job.optimizer.lr, total_steps);
    if (state.step == 0)
      say("training " + job.job.name + ": " + std::to_string(replicas->store().count()) + " parameters, " +
          std::to_string(train_data->size()) + " training samples, " + std::to_string(steps_per_epoch) +
          " steps/epoch, " + describeAccumulation(job.train) +
          (device.isCpu() ? std::to_string(job.job.threads) + " threads (CPU kernels " +
                                cpu::levelName(cpu::activeLevel()) + ")"
                          : "on " + describeDevice(device)) +
          strategy->describeRun());
    else
      say("resuming " + job.job.name + " at step " + std::to_string(state.step) + " (epoch " +
          std::to_string(state.epoch + 1) + ", sample " + std::to_string(state.position) + ")");
    if (device.isCpu())
      if (const std::string cpu_precision = describeCpuPrecision(job.job); !cpu_precision.empty())
        say(cpu_precision);
    if (!batch_plan.empty()) say("data: " + batch_plan);
    if (state.step >= total_steps) {
      out.already_finished = true;
      out.step = state.step;
      out.checkpoint = last_checkpoint;
      return out;
    }
    installStopHandlers();
    Batch batch;
    catchUp();  // a replacement joins at the point the survivors re-formed at
    while (state.step < total_steps && !stopping()) {
      loader->start(state.epoch, state.position);
      int64_t first = state.position == 0 ? 0 : state.position / job.train.updateBatch();
      if (!quiet())
        progress->beginEpoch(state.epoch, epochs,
                             std::min(steps_per_epoch, total_steps - state.epoch * steps_per_epoch), first);
      epoch_sums = EpochSums{};
      auto last = std::chrono::steady_clock::now();
      int64_t step_in_epoch = first;
      while (state.step < total_steps && nextBatch(batch)) {
        double lr = schedule.at(state.step);
        StepFigures f;
        // A regroup restarts the epoch loop at the position of the step redone.
        if (!orRegroup([&] { f = step(batch, lr); })) {
          catchUp();
          break;
        }
        if (opt.profile) opt.profile->stepDone(batch.size);
        saveAlgorithms();  // new choices only: the first step's, an evaluation's last short batch
        ++state.step;
        ++step_in_epoch;
        trained_epoch = state.epoch;

        state.position = loader->position();
        auto now = std::chrono::steady_clock::now();
        double dt = std::chrono::duration<double>(now - last).count();
        last = now;
        pending.push_back(
            PendingStep{state.step, state.epoch, step_in_epoch, lr, dt, stopRequested(), f, unixTime()});
        // The step before this one has long finished on a GPU: its figures are
        // reduced (with the stop flag) and shown now, one step late, so the host
        // never waits for the device. Every rank does so at the same point. An
        // elastic step's figures were agreed before its update: settled at once.
        if (pending.size() > 1 || elastic()) settleOldest();
        if (opt.step_observer) opt.step_observer(state.step);
        if (state.step == opt.fault_kill_at_step) std::raise(SIGKILL);

        bool epoch_done = state.position >= static_cast<int64_t>(sampler->size());
        if (epoch_done) {
          ++state.epoch;
          state.position = 0;
        }
        bool last_step = state.step == total_steps;
        const Due due = dueAt(epoch_done, last_step);
        const bool eval_now = due.eval, checkpoint_now = due.checkpoint;
        // An epoch's end, an evaluation or a checkpoint shows and records every
        // step before it (the host waits for the device there, not per step).
        if (epoch_done || last_step || eval_now || checkpoint_now) settleAll();
        if (epoch_done || last_step) {
          if (!quiet()) progress->endEpoch();
        }
        if (last_step && !opt.profile) strategy->drainUpdates();  // the final figures hold every worker's
        if (!orRegroup([&] { evaluateAndCheckpoint(due, epoch_done, last_step); })) {
          catchUp();
          break;
        }
        if (f.regroup) {  // replacements wait: every rank agreed to take them in after this step
          regroup("replacements wait to join");
          catchUp();
          break;
        }
        // The next step's images/s should not include this evaluation or checkpoint.
        last = std::chrono::steady_clock::now();
        if (epoch_done || stopping()) break;
      }
      settleAll();
    }
    out.step = state.step;
    if (stopping() && state.step < total_steps) {
      if (!quiet()) progress->endEpoch();
      out.interrupted = true;
      out.stop_signal = stopping();
      if (!opt.profile) checkpoint("interrupted");
    }
    out.checkpoint = last_checkpoint;
    out.test_loss = last_eval.loss;
    out.test_accuracy = last_eval_step >= 0 ? last_eval.accuracy : -1;
    out.graph_replays = graph_replays;
    return out;
  }
};

Trainer::Trainer(JobConfig job, TrainerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->job = std::move(job);
  impl_->opt = options;
}

Trainer::~Trainer() = default;

TrainOutcome Trainer::run(const ResumePoint* resume) {
  if (resume) {
    impl_->state = resume->state;
    impl_->last_checkpoint_step = impl_->state.step;
    impl_->last_checkpoint = resume->checkpoint.dir;
  }
  impl_->setUp(resume ? &resume->checkpoint : nullptr);
  const TrainOutcome out = impl_->loop();
  impl_->strategy->finish();
  return out;
}

}  // namespace dtrain
