#include "core/comm/gloo_store.h"

#include <doctest/doctest.h>

#include "core/comm/in_memory_store.h"
#include "core/errors.h"

using namespace dtrain;
using namespace std::chrono_literals;

TEST_CASE("gloo store adapter: keys live under the prefix, so groups can share a store") {
  InMemoryStore store;
  GlooStore first(store, "job/gen1/gloo", 1s);
  GlooStore second(store, "job/gen2/gloo", 1s);
  first.set("0", {'a', 'b'});
  second.set("0", {'z'});
  CHECK(store.get("job/gen1/gloo/0", 0ms) == Bytes{'a', 'b'});
  CHECK(store.get("job/gen2/gloo/0", 0ms) == Bytes{'z'});
  CHECK(first.get("0") == std::vector<char>{'a', 'b'});
  CHECK(second.get("0") == std::vector<char>{'z'});
  CHECK(first.fullKey("3") == "job/gen1/gloo/3");
  GlooStore unprefixed(store, "", 1s);
  CHECK(unprefixed.fullKey("3") == "3");
}

TEST_CASE("gloo store adapter: every wait is bounded, Gloo's 'no timeout' included") {
  InMemoryStore store;
  GlooStore adapter(store, "g", 200ms);
  store.set("g/0", {1});
  CHECK_NOTHROW(adapter.wait({"0"}));
  auto start = std::chrono::steady_clock::now();
  // Gloo passes zero for "no timeout": the adapter's own deadline applies.
  CHECK_THROWS_WITH_AS(adapter.wait({"0", "1"}, std::chrono::milliseconds(0)), doctest::Contains("'g/1'"),
                       CommError);
  CHECK_THROWS_WITH_AS(adapter.get("2"), doctest::Contains("'g/2'"), CommError);
  CHECK_THROWS_WITH_AS(adapter.wait({"5"}, 50ms), doctest::Contains("50 ms"), CommError);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}
