#include "core/comm/in_memory_store.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "collectives_test_util.h"
#include "core/errors.h"

using namespace dtrain;
using namespace dtrain::testing;
using namespace std::chrono_literals;

namespace {

Bytes bytesOf(const std::string& text) { return Bytes(text.begin(), text.end()); }

std::string errorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("in-memory store: get waits for a set made later by another thread") {
  InMemoryStore store;
  auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    store.set("addr/1", bytesOf("hello"));
  });
  Bytes value = store.get("addr/1", 5s);
  writer.join();
  CHECK(value == bytesOf("hello"));
  CHECK(secondsSince(start) >= 0.09);
  CHECK(store.check("addr/1"));
}

TEST_CASE("in-memory store: get times out naming the key") {
  InMemoryStore store;
  store.set("present", bytesOf("x"));
  auto start = std::chrono::steady_clock::now();
  std::string error = errorOf([&] { store.get("addr/3", 150ms); });
  double waited = secondsSince(start);
  CHECK(error.find("'addr/3'") != std::string::npos);
  CHECK(error.find("150 ms") != std::string::npos);
  CHECK(waited >= 0.14);
  CHECK(waited < 2.0);
}

TEST_CASE("in-memory store: wait names only the keys still missing") {
  InMemoryStore store;
  store.set("a", bytesOf("1"));
  std::string error = errorOf([&] { store.wait({"a", "b", "c"}, 100ms); });
  CHECK(error.find("'b', 'c'") != std::string::npos);
  CHECK(error.find("'a'") == std::string::npos);
}

TEST_CASE("in-memory store: wait returns once every key is set") {
  InMemoryStore store;
  std::vector<std::thread> writers;
  for (int r = 0; r < 4; ++r)
    writers.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * r));
      store.set("rank/" + std::to_string(r), bytesOf(std::to_string(r)));
    });
  CHECK_NOTHROW(store.wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 5s));
  for (std::thread& t : writers) t.join();
  CHECK(store.get("rank/2", 0ms) == bytesOf("2"));
}

TEST_CASE("in-memory store: set replaces a value and check does not wait") {
  InMemoryStore store;
  CHECK_FALSE(store.check("k"));
  store.set("k", bytesOf("one"));
  store.set("k", bytesOf("two"));
  CHECK(store.get("k", 0ms) == bytesOf("two"));
}

TEST_CASE("in-memory store: add is atomic across threads") {
  InMemoryStore store;
  constexpr int kThreads = 8, kAdds = 2000;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) seen[t].push_back(store.add("counter", 1));
    });
  for (std::thread& t : threads) t.join();
  // Every new value was returned to exactly one caller.
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kAdds);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int64_t>(i) + 1;
  CHECK(all == expected);
  CHECK(store.add("counter", 0) == kThreads * kAdds);
  CHECK(store.get("counter", 0ms) == bytesOf(std::to_string(kThreads * kAdds)));
}

TEST_CASE("in-memory store: add starts from zero, takes negative deltas and wakes waiters") {
  InMemoryStore store;
  std::thread waiter([&] { CHECK(store.get("n", 5s) == bytesOf("5")); });
  CHECK(store.add("n", 5) == 5);
  waiter.join();
  CHECK(store.add("n", -7) == -2);
}

TEST_CASE("in-memory store: add refuses a value that is not an integer, and overflow") {
  InMemoryStore store;
  store.set("address", bytesOf("10.0.0.1:29500"));
  CHECK(errorOf([&] { store.add("address", 1); }).find("not a decimal integer") != std::string::npos);
  store.add("big", INT64_MAX);
  CHECK(errorOf([&] { store.add("big", 1); }).find("overflows") != std::string::npos);
  CHECK(store.add("big", 0) == INT64_MAX);
}
