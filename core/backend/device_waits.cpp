#include "core/backend/device_waits.h"

#include <atomic>

namespace dtrain {

namespace {
std::atomic<int64_t> waits{0};
std::atomic<int64_t> ahead_waits{0};
}  // namespace

void noteDeviceWait() { waits.fetch_add(1, std::memory_order_relaxed); }

int64_t deviceWaits() { return waits.load(std::memory_order_relaxed); }

void noteHostAheadWait() { ahead_waits.fetch_add(1, std::memory_order_relaxed); }

int64_t hostAheadWaits() { return ahead_waits.load(std::memory_order_relaxed); }

}  // namespace dtrain
