#include "core/config/suggest.h"

#include <doctest/doctest.h>

using dtrain::closestMatch;

TEST_CASE("closestMatch suggests near misses and prefixes, nothing for unrelated words") {
  const std::vector<std::string> keys = {"type", "lr", "momentum", "nesterov", "weight_decay"};
  CHECK(closestMatch("momentun", keys) == "momentum");
  CHECK(closestMatch("nestrov", keys) == "nesterov");
  CHECK(closestMatch("mometnum", keys) == "momentum");  // swapped letters count once
  CHECK(closestMatch("lr_rate", keys) == "lr");         // a known key is a prefix
  CHECK(closestMatch("weight", keys) == "weight_decay");
  CHECK(closestMatch("LR", keys) == "lr");
  CHECK(closestMatch("lerning_rate", keys) == "");
  CHECK(closestMatch("x", keys) == "");
  CHECK(closestMatch("", keys) == "");
  CHECK(closestMatch("optimiser", {"job", "optimizer", "schedule"}) == "optimizer");
  CHECK(closestMatch("anything", {}) == "");
}
