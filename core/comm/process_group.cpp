#include "core/comm/process_group.h"

#include "core/errors.h"

namespace dtrain {

namespace {

[[noreturn]] void noPointToPoint(const ProcessGroup& g) {
  throw CommError(g.describe() + " carries collectives only, no messages between two ranks");
}

}  // namespace

void ProcessGroup::allGatherInPlace(float* data, const std::vector<int64_t>& counts) {
  if (counts.size() != static_cast<size_t>(size()))
    throw CommError("all-gather: " + std::to_string(counts.size()) + " counts given for a group of " +
                    std::to_string(size()) + " ranks (one count per rank)");
  int64_t offset = 0;
  for (int r = 0; r < size(); ++r) {
    broadcast(data + offset, counts[static_cast<size_t>(r)], r);
    offset += counts[static_cast<size_t>(r)];
  }
}

void ProcessGroup::sendAsync(const void*, int64_t, int, uint32_t) { noPointToPoint(*this); }
void ProcessGroup::recv(void*, int64_t, int, uint32_t) { noPointToPoint(*this); }
void ProcessGroup::waitSends() {}

}  // namespace dtrain
