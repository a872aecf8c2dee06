// A loader's batch cut into the micro-batches of [train] accumulate: the
// update's samples pass the model a micro-batch at a time, so the activations
// held are those of one micro-batch, while the gradient they add up to is the
// whole batch's.
#pragma once
#include <cstdint>

#include "datasets/batch_loader.h"

namespace dtrain {

// Rows [begin, begin + n) of `batch` as a batch of their own: a view of its
// floats (or, in the Indices form, of its samples' transforms), its labels
// copied. What the gradient's mean is taken over stays the whole global
// batch's (global_size, global_labels), so each micro-batch's gradient is its
// share of the update's; global_offset moves with the rows, so dropout masks
// (drawn by global row) are those of the undivided batch. Throws Error for
// rows outside the batch, or a batch in the Bytes form, whose transforms
// address rows of the whole batch's bytes (a run that accumulates sends its
// batches to the GPU as floats or indices instead).
Batch microBatchOf(const Batch& batch, int64_t begin, int64_t n);

// Micro-batch m of `count` (0 <= m < count): the rows cut as evenly as
// WorkerPool::split cuts them, so every worker cuts its slice into the same
// number of micro-batches (some empty at an epoch's short end).
Batch nthMicroBatch(const Batch& batch, int64_t m, int64_t count);

}  // namespace dtrain
