// Job files give durations in seconds (floats); the code waits in milliseconds.
#pragma once
#include <chrono>
#include <cstdint>

namespace dtrain {

inline std::chrono::milliseconds secondsToMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace dtrain
