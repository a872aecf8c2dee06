#include "core/comm/process_group.h"

#include "core/errors.h"

namespace dtrain {

namespace {

[[noreturn]] void noPointToPoint(const ProcessGroup& g) {
  throw CommError(g.describe() + " carries collectives only, no messages between two ranks");
}

}  // namespace

void ProcessGroup::sendAsync(const void*, int64_t, int, uint32_t) { noPointToPoint(*this); }
void ProcessGroup::recv(void*, int64_t, int, uint32_t) { noPointToPoint(*this); }
void ProcessGroup::waitSends() {}

}  // namespace dtrain
