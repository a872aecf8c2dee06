// RendezvousCoordinator driven directly, on a clock the test moves: deadlines
// are checked to the millisecond, without sockets or threads.
#include "core/comm/rendezvous_coordinator.h"

#include <doctest/doctest.h>

#include <map>
#include <utility>

#include "coordinator_driver.h"
#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("rendezvous coordinator: a rank is lost exactly after the heartbeat timeout") {
  RendezvousServerConfig config = serverConfig({2});
  config.heartbeat_timeout = 1000ms;
  Driver d(config);
  d.send("a", 1, wire::Join{joinRequest(0, 0)});
  d.send("b", 1, wire::Join{joinRequest(0, 1)});
  CHECK(only<wire::Welcome>(d.take("a")).membership.rank == 0);
  CHECK(only<wire::Welcome>(d.take("b")).membership.rank == 1);

  d.advance(600ms);
  d.send("a", 2, withGeneration(wire::Heartbeat{}, 1));
  only<wire::Ok>(d.take("a"));
  d.advance(400ms);  // b silent for exactly the timeout: not yet lost
  CHECK(d.take("a").empty());
  CHECK_FALSE(d.coordinator().status().failure.has_value());
  d.advance(1ms);
  const std::string expected = "lost rank 1 (host host0, pid 1001): no heartbeat for 1.0 s";
  auto to_a = d.take("a");
  const wire::AbortNotice& notice = only<wire::AbortNotice>(to_a);
  CHECK(notice.reason == expected);
  CHECK(notice.origin_rank == -1);
  CHECK(only<wire::AbortNotice>(d.take("b")).reason == expected);
  CHECK(d.coordinator().status().failure == expected);

  // Afterwards the group refuses requests with why it ended.
  d.send("a", 3, withGeneration(wire::Check{}, 1));
  CHECK(only<wire::Refused>(d.take("a")).reason == "the run of generation 1 was aborted: " + expected);
}

TEST_CASE("rendezvous coordinator: parked reads answer on the set, or at their deadline") {
  Driver d(serverConfig({2}));
  d.send("a", 1, wire::Join{joinRequest(0, 0)});
  d.send("b", 1, wire::Join{joinRequest(0, 1)});
  d.take("a");
  d.take("b");
  wire::Get get = withGeneration(wire::Get{}, 1);
  get.key = "addr";
  get.timeout_ms = 500;
  d.send("a", 7, get);
  wire::Wait wait = withGeneration(wire::Wait{}, 1);
  wait.keys = {"addr", "port"};
  wait.timeout_ms = 500;
  d.send("b", 8, wait);
  d.advance(499ms);
  CHECK(d.take("a").empty());
  wire::Set set = withGeneration(wire::Set{}, 1);
  set.key = "addr";
  set.value = bytesOf("10.0.0.1");
  d.send("b", 9, set);
  auto answers = d.take("a");
  CHECK(textOf(only<wire::Value>(answers).value) == "10.0.0.1");
  CHECK(answers.front().request_id == 7);
  only<wire::Ok>(d.take("b"));  // the set's answer; the wait still lacks "port"
  d.advance(1ms);
  auto timed_out = d.take("b");
  CHECK(only<wire::Refused>(timed_out).reason ==
        "timed out after 0.5 s waiting for keys 'port' (1 of 2 not set)");
  CHECK(timed_out.front().request_id == 8);
}

TEST_CASE("rendezvous coordinator: a new generation forms after every rank left") {
  Driver d(serverConfig({1}));
  d.send("a", 1, wire::Join{joinRequest(0, 0)});
  CHECK(only<wire::Welcome>(d.take("a")).membership.generation == 1);
  d.send("a", 2, withGeneration(wire::Leave{}, 1));
  only<wire::Ok>(d.take("a"));
  CHECK(d.coordinator().status().all_left);
  d.send("a", 3, withGeneration(wire::Check{}, 1));
  CHECK(only<wire::Refused>(d.take("a")).reason == "the run of generation 1 has ended: every rank left");

  d.send("b", 1, wire::Join{joinRequest(0, 0)});
  CHECK(only<wire::Welcome>(d.take("b")).membership.generation == 2);
  RendezvousStatus s = d.coordinator().status();
  CHECK(s.generation == 2);
  CHECK(s.formed);
  CHECK_FALSE(s.all_left);
  d.send("a", 4, withGeneration(wire::Check{}, 1));
  CHECK(only<wire::Refused>(d.take("a")).reason.find("stale generation 1, the run is at 2") == 0);
  d.send("b", 2, withGeneration(wire::Check{}, 3));
  CHECK(only<wire::Refused>(d.take("b")).reason == "unknown generation 3, the run is at 2");
}

TEST_CASE("rendezvous coordinator: a survivable rank's loss is announced, not fatal, until one too many") {
  RendezvousServerConfig config = serverConfig({4});
  config.heartbeat_timeout = 1000ms;
  config.survivable = {false, true, true, false};  // ranks 1 and 2 may be lost ...
  config.max_survivable_losses = 1;                // ... but only one of them
  Driver d(config);
  for (int r = 0; r < 4; ++r)
    d.send(std::string(1, static_cast<char>('a' + r)), 1, wire::Join{joinRequest(0, r)});
  for (const char* p : {"a", "b", "c", "d"}) d.take(p);
  auto beat = [&](const std::vector<std::string>& peers) {
    for (const std::string& p : peers) {
      d.send(p, 2, withGeneration(wire::Heartbeat{}, 1));
      d.take(p);
    }
  };

  // Rank 2 falls silent: dropped and announced; the others go on.
  d.advance(600ms);
  beat({"a", "b", "d"});
  d.advance(401ms);
  CHECK(d.take("a").empty());
  CHECK_FALSE(d.coordinator().status().failure.has_value());
  CHECK(only<wire::AbortNotice>(d.take("c")).reason.find("this rank was lost") == 0);  // told it was dropped
  wire::Get get = withGeneration(wire::Get{}, 1);
  get.key = kLostRanksKey;
  get.timeout_ms = 100;
  d.send("a", 3, get);
  CHECK(textOf(only<wire::Value>(d.take("a")).value) == "2 host0\n");
  // Its requests are refused from now on.
  d.send("c", 4, withGeneration(wire::Check{}, 1));
  CHECK(only<wire::Refused>(d.take("c")).reason == "rank 2 has already left the run");

  // Its host saw rank 1 die too: one loss more than the job allows aborts the run.
  d.lose(1, "killed by signal 9");
  REQUIRE(d.coordinator().status().failure.has_value());
  CHECK(d.coordinator().status().failure->find("lost rank 1 (host host0, pid 1001): killed by signal 9") ==
        0);
  CHECK(only<wire::AbortNotice>(d.take("d")).reason == *d.coordinator().status().failure);
}
