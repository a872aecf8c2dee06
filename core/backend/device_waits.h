// Every time the host waits for a GPU goes through here: the CUDA module
// calls noteDeviceWait() in each of its synchronising calls (a stream or
// event synchronisation), so a test can assert that a training step in its
// steady state never makes the host wait for the device; when the host waits,
// the GPU may run dry.
#pragma once
#include <cstdint>

namespace dtrain {

// One synchronising call made (from any thread).
void noteDeviceWait();
// Synchronising calls made so far by this process.
int64_t deviceWaits();

}  // namespace dtrain
