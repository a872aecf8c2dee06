#include "core/backend/batch_stager.h"

#include "core/backend/cuda_module.h"
#include "core/errors.h"

namespace dtrain {

std::unique_ptr<BatchStager> BatchStager::make(Device device, int64_t max_image_floats, int64_t max_labels) {
  if (device.isCpu()) throw Error("BatchStager is for GPUs; the CPU computes on the loader's buffers");
  return cudaBackend(device).batchStager(device.index, max_image_floats, max_labels);
}

}  // namespace dtrain
