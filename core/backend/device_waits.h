// Every time the host waits for a GPU goes through here: the CUDA module
// calls noteDeviceWait() in each of its synchronising calls (a stream or
// event synchronisation), so a test can assert that a training step in its
// steady state never makes the host wait for the device; when the host waits,
// the GPU may run dry. A wait for work queued whole steps ahead is counted
// apart (noteHostAheadWait): the host ran ahead of a busy device and is held
// back while the steps it queued since keep the device busy.
#pragma once
#include <cstdint>

namespace dtrain {

// One synchronising call made (from any thread).
void noteDeviceWait();
// Synchronising calls made so far by this process.
int64_t deviceWaits();

// The host waited only because it had queued whole steps beyond the work it
// waits for (back-pressure on a host faster than the device).
void noteHostAheadWait();
// Such waits made so far by this process.
int64_t hostAheadWaits();

}  // namespace dtrain
