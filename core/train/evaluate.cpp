#include "core/train/evaluate.h"

#include <chrono>

#include "datasets/batch_loader.h"
#include "datasets/sampler.h"

namespace dtrain {

EvalResult evaluateDataset(ReplicaSet& replicas, const Dataset& data, int64_t batch_size, int prefetch) {
  auto start = std::chrono::steady_clock::now();
  Sampler sampler(data.size(), 0, /*shuffle=*/false);
  BatchLoader loader(data, sampler, batch_size, prefetch);
  loader.start(0, 0);
  Batch batch;
  BatchFigures total;
  while (loader.next(batch)) total += replicas.evaluate(batch);
  EvalResult r;
  r.samples = total.samples;
  if (total.samples > 0) {
    r.loss = total.loss_sum / static_cast<double>(total.samples);
    r.accuracy = static_cast<double>(total.correct) / static_cast<double>(total.samples);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace dtrain
