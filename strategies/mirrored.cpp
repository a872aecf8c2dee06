#include "strategies/mirrored.h"

#include <utility>

namespace dtrain {

MirroredStrategy::MirroredStrategy(std::string name, std::shared_ptr<ProcessGroup> group)
    : name_(std::move(name)), group_(std::move(group)) {}

void MirroredStrategy::broadcastParameters(float* params, int64_t n) { group_->broadcast(params, n, 0); }

void MirroredStrategy::broadcastFromChief(void* data, int64_t bytes) {
  group_->broadcastBytes(static_cast<uint8_t*>(data), bytes, 0);
}

void MirroredStrategy::reduceGradients(float* grads, int64_t n) { group_->allReduceSum(grads, n); }

void MirroredStrategy::reduceFigures(double* values, int64_t n) { group_->allReduceSum(values, n); }

}  // namespace dtrain
