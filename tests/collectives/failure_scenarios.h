// Failure scenarios played the same way against every process group kind
// (Gloo, shared memory): ranks are threads, each building its group through
// a maker; each suite then asserts its own group's wording and timing.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives_test_util.h"
#include "core/comm/process_group.h"
#include "core/errors.h"

namespace dtrain::testing {

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Spins (briefly sleeping) until `flag` is set or `limit` passes.
inline void awaitFlag(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!flag.load() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Builds rank `rank`'s group (the maker holds the store, size and options).
using GroupMaker = std::function<std::unique_ptr<ProcessGroup>(int rank)>;

struct ScenarioOutcome {
  std::vector<std::string> errors;        // what each rank threw ("" if nothing)
  std::vector<std::string> later_errors;  // a call made after the failure, where the scenario makes one
  std::vector<double> took;               // seconds until the failing call threw
};

// Every rank but `absent` builds its group; `took` is how long it waited.
inline ScenarioOutcome absentRank(int size, int absent, const GroupMaker& make) {
  ScenarioOutcome out;
  out.took.assign(size, 0);
  out.errors = runRanks(size, [&](int rank) {
    if (rank == absent) return;  // never comes
    auto start = std::chrono::steady_clock::now();
    try {
      make(rank);
    } catch (...) {
      out.took[rank] = secondsSince(start);
      throw;
    }
  });
  return out;
}

// Every rank all-reduces 1001 floats once; then all but `skipper` call again
// (timed) and, once that failed, a barrier (`later_errors`). The skipper
// keeps its group until the others gave up.
inline ScenarioOutcome skippedCall(int size, int skipper, const GroupMaker& make) {
  ScenarioOutcome out;
  out.took.assign(size, 0);
  out.later_errors.assign(size, "");
  std::atomic<int> failed{0};
  std::atomic<bool> othersDone{false};
  out.errors = runRanks(size, [&](int rank) {
    std::unique_ptr<ProcessGroup> group = make(rank);
    std::vector<float> data(1001, 1.0f);
    group->allReduceSum(data.data(), 1001);  // everyone takes part once
    if (rank == skipper) {
      awaitFlag(othersDone, std::chrono::seconds(10));
      return;
    }
    auto start = std::chrono::steady_clock::now();
    try {
      group->allReduceSum(data.data(), 1001);
    } catch (const CommError&) {
      out.took[rank] = secondsSince(start);
      try {
        group->barrier();  // a failed group refuses at once
      } catch (const CommError& e) {
        out.later_errors[rank] = e.what();
      }
      if (++failed == size - 1) othersDone = true;
      throw;
    }
  });
  return out;
}

// Every rank all-reduces 1001 floats once; then `failing` throws "rank N hit
// an error of its own", destroying its group while unwinding, and the others
// all-reduce three more times (timed). With `hold_until_all_failed` each
// survivor keeps its group until every survivor has failed, so none of them
// sees another survivor leave.
inline ScenarioOutcome rankFailsWithGroup(int size, int failing, const GroupMaker& make,
                                          bool hold_until_all_failed) {
  ScenarioOutcome out;
  out.took.assign(size, 0);
  std::atomic<int> failed{0};
  std::atomic<bool> othersDone{false};
  out.errors = runRanks(size, [&](int rank) {
    std::unique_ptr<ProcessGroup> group = make(rank);
    std::vector<float> data(1001, 1.0f);
    group->allReduceSum(data.data(), 1001);
    if (rank == failing)
      throw std::runtime_error("rank " + std::to_string(rank) + " hit an error of its own");
    auto start = std::chrono::steady_clock::now();
    try {
      for (int step = 0; step < 3; ++step) group->allReduceSum(data.data(), 1001);
    } catch (...) {
      out.took[rank] = secondsSince(start);
      if (hold_until_all_failed) {
        if (++failed == size - 1) othersDone = true;
        awaitFlag(othersDone, std::chrono::seconds(10));
      }
      throw;
    }
  });
  return out;
}

}  // namespace dtrain::testing
