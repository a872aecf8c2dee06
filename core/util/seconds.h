// Job files give durations in seconds (floats); the code waits in milliseconds
// and messages say how long in words.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain {

inline std::chrono::milliseconds secondsToMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// "250 ms", "1.5 s", "2 s": how long a caller waited, for messages.
std::string durationText(std::chrono::milliseconds d);

}  // namespace dtrain
