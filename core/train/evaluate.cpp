#include "core/train/evaluate.h"

#include <chrono>

#include "datasets/batch_loader.h"
#include "datasets/loader_options.h"
#include "datasets/sampler.h"

namespace dtrain {

EvalResult evaluateDataset(ReplicaSet& replicas, const Dataset& data, int64_t batch_size,
                           const DataSection& data_config, Shard shard,
                           const std::function<void(double*, int64_t)>& reduce) {
  return evaluateDataset([&](const Batch& batch) { return replicas.evaluate(batch); },
                         !replicas.device().isCpu(), data, batch_size, data_config, shard, reduce);
}

EvalResult evaluateDataset(const std::function<BatchFigures(const Batch&)>& evaluate_batch, bool pinned,
                           const Dataset& data, int64_t batch_size, const DataSection& data_config,
                           Shard shard, const std::function<void(double*, int64_t)>& reduce) {
  auto start = std::chrono::steady_clock::now();
  Sampler sampler(data.size(), 0, /*shuffle=*/false);
  BatchLoader loader(data, sampler, batch_size,
                     loaderOptionsFor(data_config, data, Split::Test, /*seed=*/0, shard, pinned));
  loader.start(0, 0);
  Batch batch;
  BatchFigures total;
  while (loader.next(batch)) total += evaluate_batch(batch);
  double sums[3] = {total.loss_sum, static_cast<double>(total.correct), static_cast<double>(total.samples)};
  if (reduce) reduce(sums, 3);
  EvalResult r;
  r.samples = static_cast<int64_t>(sums[2]);
  if (r.samples > 0) {
    r.loss = sums[0] / sums[2];
    r.accuracy = sums[1] / sums[2];
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace dtrain
