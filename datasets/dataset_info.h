// What a job's dataset looks like, read from file headers only (milliseconds),
// for `dtrain check`: sample shape, class count and split sizes.
#pragma once
#include <cstdint>

#include "core/config/job_config.h"
#include "core/tensor/shape.h"

namespace dtrain {

struct DatasetInfo {
  Shape sample_shape;  // [C,H,W]
  int64_t classes = 0;
  int64_t train_samples = 0;
  int64_t test_samples = 0;
};

// Throws like openDataset for missing or malformed files (header problems only).
DatasetInfo peekDataset(const DataSection& data);

}  // namespace dtrain
