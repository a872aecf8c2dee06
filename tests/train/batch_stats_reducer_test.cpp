// BatchStatsReducer: the sum over the compute threads that take part, in
// thread order, with the ranks' sum applied once per call; a failed thread
// releases the others with an error instead of leaving them waiting.
#include "core/train/batch_stats_reducer.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/errors.h"

using namespace dtrain;

namespace {

// Runs fn(t) on `threads` threads and joins them; returns the errors seen.
int runThreads(int threads, const std::function<void(int)>& fn) {
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        fn(t);
      } catch (const Error&) {
        ++errors;
      }
    });
  for (auto& th : pool) th.join();
  return errors;
}

}  // namespace

TEST_CASE("BatchStatsReducer: every participant gets the sum, call after call") {
  std::atomic<int> rank_calls{0};
  BatchStatsReducer reducer(3, [&](double* data, int64_t n) {
    ++rank_calls;
    for (int64_t i = 0; i < n; ++i) data[i] *= 10;  // stands in for the other ranks' share
  });
  reducer.beginPass({true, true, true});
  std::vector<std::vector<double>> got(3);
  CHECK(runThreads(3, [&](int t) {
          for (int call = 0; call < 50; ++call) {
            double v[2] = {static_cast<double>(t + 1), static_cast<double>(call)};
            reducer.forReplica(t)->allReduceSum(v, 2);
            got[static_cast<size_t>(t)].push_back(v[0]);
            got[static_cast<size_t>(t)].push_back(v[1]);
          }
        }) == 0);
  CHECK(rank_calls == 50);  // once per call, not once per thread
  for (int t = 0; t < 3; ++t) {
    REQUIRE(got[static_cast<size_t>(t)].size() == 100);
    for (int call = 0; call < 50; ++call) {
      CHECK(got[static_cast<size_t>(t)][2 * call] == 60.0);  // (1 + 2 + 3) * 10
      CHECK(got[static_cast<size_t>(t)][2 * call + 1] == 30.0 * call);
    }
  }
}

TEST_CASE("BatchStatsReducer: only the threads taking part are waited for and summed") {
  BatchStatsReducer reducer(3, nullptr);
  reducer.beginPass({true, false, true});
  std::vector<double> result(3, -1);
  CHECK(runThreads(3, [&](int t) {
          if (t == 1) return;  // no samples in this pass
          double v = t == 0 ? 1.5 : 2.25;
          reducer.forReplica(t)->allReduceSum(&v, 1);
          result[static_cast<size_t>(t)] = v;
        }) == 0);
  CHECK(result[0] == 3.75);
  CHECK(result[2] == 3.75);
  CHECK(result[1] == -1);
}

TEST_CASE("BatchStatsReducer: a failing thread's abort releases the waiting ones with an error") {
  BatchStatsReducer reducer(2, nullptr);
  reducer.beginPass({true, true});
  const int errors = runThreads(2, [&](int t) {
    if (t == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      reducer.abort();  // as ReplicaSet does when a thread's pass throws
      throw Error("replica 1 failed");
    }
    double v = 1;
    reducer.forReplica(t)->allReduceSum(&v, 1);
  });
  CHECK(errors == 2);
  // The next pass works again.
  reducer.beginPass({true, true});
  CHECK(runThreads(2, [&](int t) {
          double v = t;
          reducer.forReplica(t)->allReduceSum(&v, 1);
          CHECK(v == 1.0);
        }) == 0);
}

TEST_CASE("BatchStatsReducer: a failing sum across ranks reaches the caller and frees the others") {
  BatchStatsReducer reducer(2, [](double*, int64_t) { throw CommError("rank 1 left"); });
  reducer.beginPass({true, true});
  const int errors = runThreads(2, [&](int t) {
    double v = 1;
    try {
      reducer.forReplica(t)->allReduceSum(&v, 1);
    } catch (...) {
      reducer.abort();
      throw;
    }
  });
  CHECK(errors == 2);
}
