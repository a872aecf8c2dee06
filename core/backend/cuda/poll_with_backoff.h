// Waiting on what the host can only ask about (a CUDA event, NCCL's state)
// without keeping a core busy and without waiting forever: ask at once, then
// every 100 us, the pause growing by a quarter each time up to 1 ms, so a
// short collective is seen done within about 100 us and a long or stuck one
// costs a thousand cheap questions a second.
#pragma once
#include <algorithm>
#include <chrono>
#include <thread>

namespace dtrain {

// Calls done() until it returns true (then returns true) or `deadline`
// passes (then returns false). An exception from done() ends the wait.
template <typename Done>
bool pollWithBackoff(Done&& done, std::chrono::steady_clock::time_point deadline) {
  constexpr std::chrono::microseconds kFirstPause{100}, kLongestPause{1000};
  std::chrono::microseconds pause = kFirstPause;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause + pause / 4, kLongestPause);
  }
}

}  // namespace dtrain
