#include "core/train/stop_signal.h"

#include <csignal>

namespace dtrain {

namespace {
// A signal handler can only reach process-wide state; this flag is the one place.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void onStopSignal(int sig) {
  if (g_stop_signal != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
}
}  // namespace

void installStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stopRequested() { return g_stop_signal; }

}  // namespace dtrain
