#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "core/io/json.h"
#include "core/nn/layer_registry.h"
#include "core/train/device_choice.h"
#include "core/train/evaluate.h"
#include "core/train/model_checkpoint.h"
#include "core/train/replica_set.h"
#include "core/train/trainer.h"
#include "datasets/dataset.h"

namespace dtrain::cli {

int runEval(const EvalArgs& args) {
  ResumePoint from = loadResumePointReporting(args.checkpoint);
  const JobConfig& job = from.job;
  const Device device = computeDevice(job.job);
  auto test = openDataset(job.data, Split::Test, job.job.seed);
  ReplicaSet replicas(job.model, test->sampleShape(), test->classes(), builtinLayers(),
                      device.isCpu() ? resolveThreads(0) : 1, job.train.batch_size, device,
                      gpuLayerOptions(job.job, nullptr));
  // The run's own arithmetic, so the score is the one its evaluations logged.
  replicas.setPrecision(precisionNamed(job.job.precision));
  restoreCheckpoint(from.checkpoint, replicas.store(), replicas.buffers(), nullptr);
  // One process, whatever strategy trained the weights.
  EvalResult r = evaluateDataset(replicas, *test, job.train.eval_batch_size, job.data, Shard{0, 1}, {});
  // A language model's figures are per token; a byte-level one's are per byte too.
  const bool tokens = replicas.labelsPerSample() > 1, bytes = tokens && job.data.dataset == "text";
  if (args.json) {
    JsonWriter w;
    w.add("loss", r.loss);
    w.add("accuracy", r.accuracy);
    w.add(tokens ? "tokens" : "samples", r.samples);
    if (tokens) w.add("perplexity", std::exp(r.loss));
    if (bytes) w.add("bits_per_byte", r.loss / std::log(2.0));
    std::printf("%s\n", w.str().c_str());
  } else if (tokens) {
    char bits[40] = "";
    if (bytes) std::snprintf(bits, sizeof bits, ", bits/byte %.4f", r.loss / std::log(2.0));
    std::printf("%s (step %lld): test loss %.4f, perplexity %.3f%s, accuracy %.4f over %lld tokens\n",
                from.checkpoint.dir.c_str(), static_cast<long long>(from.state.step), r.loss,
                std::exp(r.loss), bits, r.accuracy, static_cast<long long>(r.samples));
  } else {
    std::printf("%s (step %lld): test loss %.4f, accuracy %.4f over %lld samples\n",
                from.checkpoint.dir.c_str(), static_cast<long long>(from.state.step), r.loss, r.accuracy,
                static_cast<long long>(r.samples));
  }
  return kExitOk;
}

}  // namespace dtrain::cli
