// SIGINT/SIGTERM ask the trainer to stop after the current step and write a
// checkpoint. A second signal while stopping ends the process at once (the
// checkpoint write is atomic, so the previous complete one stays intact).
#pragma once

namespace dtrain {

// Installs the handlers (idempotent).
void installStopHandlers();
// The signal number that asked to stop, or 0.
int stopRequested();

}  // namespace dtrain
