// Threads as ranks for the collectives tests: each rank is a thread with its
// own group over one InMemoryStore and real TCP on 127.0.0.1.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/gloo_process_group.h"

namespace dtrain::testing {

// Runs body(rank) on `size` threads and waits for them all. Returns, per
// rank, what it threw ("" when it returned normally).
inline std::vector<std::string> runRanks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(exception without a message)";
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

inline GlooOptions testOptions(const std::string& algorithm = "auto",
                               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  GlooOptions options;
  options.algorithm = algorithm;
  options.address = "127.0.0.1";
  options.timeout = timeout;
  options.prefix = "test";
  return options;
}

// What rank `rank` contributes at element i in round `round`: integers, and
// sums over up to 8 ranks stay below 2^24, so float sums are exact.
inline float contribution(int rank, int64_t i, int round) {
  return static_cast<float>(i % 1021 + 1024 * rank + 37 * round);
}

inline float sumOverRanks(int size, int64_t i, int round) {
  float sum = 0;
  for (int r = 0; r < size; ++r) sum += contribution(r, i, round);
  return sum;
}

// "" when data[i] == expected(i) for every i < n; otherwise the first mismatch.
template <typename T, typename Expected>
std::string firstMismatch(const T* data, int64_t n, Expected expected) {
  for (int64_t i = 0; i < n; ++i)
    if (data[i] != static_cast<T>(expected(i)))
      return "element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", expected " +
             std::to_string(static_cast<T>(expected(i)));
  return "";
}

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dtrain::testing
