#include "core/comm/single_process_group.h"

#include <cstring>

#include "core/comm/collective_checks.h"
#include "core/errors.h"

namespace dtrain {

namespace {

void checkRoot(const char* operation, int root) {
  if (root != 0)
    throw CommError(std::string(operation) + ": root rank " + std::to_string(root) +
                    " is outside the group (a single process has only rank 0)");
}

}  // namespace

void SingleProcessGroup::allReduceSum(float*, int64_t n) { checkElementCount("all-reduce", n); }

void SingleProcessGroup::allReduceSum(double*, int64_t n) { checkElementCount("all-reduce", n); }

void SingleProcessGroup::broadcast(float*, int64_t n, int root) {
  checkElementCount("broadcast", n);
  checkRoot("broadcast", root);
}

void SingleProcessGroup::broadcastBytes(uint8_t*, int64_t n, int root) {
  checkElementCount("broadcast", n);
  checkRoot("broadcast", root);
}

void SingleProcessGroup::allGather(const float* in, int64_t n, float* out) {
  checkElementCount("all-gather", n);
  // memmove: an in-place gather passes in == out.
  if (n > 0) std::memmove(out, in, static_cast<size_t>(n) * sizeof(float));
}

void SingleProcessGroup::reduceScatterSum(float*, const std::vector<int64_t>& counts) {
  reduceScatterTotal(counts, 1);
}

}  // namespace dtrain
