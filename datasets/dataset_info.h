// What a job's dataset looks like, read from file headers only (milliseconds;
// for image_folder a directory listing and each image's header), for `dtrain
// check`: sample shape (for image_folder [channels, image_size]), class count
// and split sizes (image_folder: readable images of each side).
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

// Throws like openDataset for missing or malformed files (header problems
// only), and ConfigError when [data] mean/std do not fit the channels.
DatasetInfo peekDataset(const DataSection& data);

}  // namespace dtrain
