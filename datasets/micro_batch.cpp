#include "datasets/micro_batch.h"

#include <string>

#include "core/errors.h"
#include "core/util/worker_pool.h"

namespace dtrain {

Batch microBatchOf(const Batch& batch, int64_t begin, int64_t n) {
  if (begin < 0 || n < 0 || begin + n > batch.size)
    throw Error("microBatchOf: rows [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
                ") outside a batch of " + std::to_string(batch.size));
  if (batch.form == BatchForm::Bytes)
    throw Error(
        "microBatchOf: a batch in the Bytes form cannot be cut (its transforms address its own rows)");
  Batch micro;
  micro.form = batch.form;
  micro.size = n;
  micro.global_size = batch.global_size;
  micro.global_offset = batch.global_offset + begin;
  micro.global_labels = batch.global_labels;
  const int64_t labels_per_sample =
      batch.size > 0 ? static_cast<int64_t>(batch.labels.size()) / batch.size : int64_t{1};
  micro.labels.assign(batch.labels.begin() + begin * labels_per_sample,
                      batch.labels.begin() + (begin + n) * labels_per_sample);
  if (batch.form == BatchForm::Floats) {
    if (batch.images.defined()) micro.images = batch.images.narrow(begin, n);
  } else {  // Indices: each transform names its dataset sample
    micro.bytes.transforms = batch.bytes.transforms ? batch.bytes.transforms + begin : nullptr;
  }
  return micro;
}

Batch nthMicroBatch(const Batch& batch, int64_t m, int64_t count) {
  const auto [begin, end] = WorkerPool::split(batch.size, static_cast<int>(count), static_cast<int>(m));
  return microBatchOf(batch, begin, end - begin);
}

}  // namespace dtrain
