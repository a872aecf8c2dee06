// The rendezvous as the run's Store and barrier: values cross ranks, reads
// wait for later writes, counters are atomic, timeouts name the key or the
// ranks that did not arrive, and a worker of an earlier generation is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("rendezvous store: set, get, add, check and wait across ranks") {
  RendezvousServer server(serverConfig({2, 1}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}, {1, 0}});
  Store& r0 = *g.clients[0];
  Store& r1 = *g.clients[1];
  Store& r2 = *g.clients[2];

  CHECK_FALSE(r1.check("addr/0"));
  r0.set("addr/0", bytesOf("10.0.0.1:5000"));
  CHECK(r1.check("addr/0"));
  CHECK(textOf(r2.get("addr/0", 1000ms)) == "10.0.0.1:5000");
  Bytes binary{0, 255, 10, 0};
  r2.set("blob", binary);
  CHECK(r0.get("blob", 1000ms) == binary);
  r1.set("blob", Bytes{});  // overwrite with an empty value: still set
  CHECK(r0.get("blob", 1000ms).empty());
  CHECK(r0.check("blob"));

  // Concurrent adds from every rank: each sees a distinct total.
  std::vector<int64_t> seen(3 * 20);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i) seen[static_cast<size_t>(r * 20 + i)] = g.clients[r]->add("counter", 1);
    });
  for (auto& t : threads) t.join();
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == static_cast<int64_t>(i + 1));
  CHECK(r0.add("counter", -60) == 0);
  CHECK(r1.add("counter", 5) == 5);
  CHECK(textOf(r2.get("counter", 100ms)) == "5");  // counters are decimal text
  CHECK(commErrorOf([&] { r0.add("addr/0", 1); }).find("cannot add to key 'addr/0'") == 0);

  r0.set("a", bytesOf("1"));
  r1.set("b", bytesOf("2"));
  r2.wait({"a", "b"}, 1000ms);  // both set: returns at once
}

TEST_CASE("rendezvous store: a get waits for a later set on another rank") {
  RendezvousServer server(serverConfig({2}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}});
  auto t0 = Clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(200ms);
    g.clients[0]->set("late", bytesOf("value"));
  });
  Bytes got = g.clients[1]->get("late", 3000ms);
  double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  writer.join();
  CHECK(textOf(got) == "value");
  CHECK(waited >= 0.15);
  CHECK(waited < 2.0);

  // wait() on several keys, the last one set later.
  std::thread second([&] {
    std::this_thread::sleep_for(100ms);
    g.clients[0]->add("x", 3);
  });
  g.clients[1]->set("y", bytesOf("."));
  g.clients[1]->wait({"x", "y"}, 3000ms);
  second.join();
  CHECK(g.clients[1]->check("x"));
}

TEST_CASE("rendezvous store: a get that times out names the key; a wait names the missing keys") {
  RendezvousServer server(serverConfig({1}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}});
  RendezvousClient& c = *g.clients[0];
  auto t0 = Clock::now();
  std::string why = commErrorOf([&] { c.get("never/set", 300ms); });
  double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(why == "timed out after 0.3 s waiting for key 'never/set' (no rank has set it)");
  CHECK(waited >= 0.25);
  CHECK(waited < 1.5);

  c.set("k1", bytesOf("v"));
  CHECK(commErrorOf([&] {
          c.wait({"k1", "k2", "k3"}, 100ms);
        }) == "timed out after 0.1 s waiting for keys 'k2', 'k3' (2 of 3 not set)");
  CHECK(commErrorOf([&] { c.get("missing", 0ms); }).find("key 'missing'") != std::string::npos);
  // The client still works after its timeouts.
  c.set("k2", bytesOf("w"));
  CHECK(textOf(c.get("k2", 100ms)) == "w");
}

TEST_CASE("rendezvous barrier: returns on every rank once the last one arrives, and can be reused") {
  RendezvousServer server(serverConfig({3}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}, {0, 2}});
  for (int round = 0; round < 2; ++round) {
    std::atomic<int> arrived{0};
    std::vector<int> arrived_when_released(3, -1);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        std::this_thread::sleep_for(std::chrono::milliseconds(60 * r));
        ++arrived;
        g.clients[static_cast<size_t>(r)]->barrier("epoch", 3000ms);
        arrived_when_released[static_cast<size_t>(r)] = arrived.load();
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) CHECK(arrived_when_released[static_cast<size_t>(r)] == 3);
  }
}

TEST_CASE("rendezvous barrier: a timeout names the ranks that did not arrive; the others carry on") {
  RendezvousServer server(serverConfig({2, 1}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}, {1, 0}});
  // Rank 1 waits patiently; rank 0 arrives later with a short timeout.
  std::atomic<bool> patient_done{false};
  std::thread patient([&] {
    g.clients[1]->barrier("sync", 5000ms);
    patient_done = true;
  });
  std::this_thread::sleep_for(150ms);
  std::string why = commErrorOf([&] { g.clients[0]->barrier("sync", 300ms); });
  CHECK(why ==
        "barrier 'sync' timed out after 0.3 s: 1 of 3 ranks have not arrived: rank 2 (host host1, pid 1010)");
  CHECK_FALSE(patient_done);
  // Rank 0 tries again and rank 2 comes: with rank 1 still waiting, the barrier completes.
  std::thread again([&] { g.clients[0]->barrier("sync", 3000ms); });
  g.clients[2]->barrier("sync", 3000ms);
  again.join();
  patient.join();
  CHECK(patient_done);
}

TEST_CASE("rendezvous barrier: a rank that leaves fails the barrier it will never reach") {
  RendezvousServer server(serverConfig({2}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}});
  std::string why;
  std::thread waiter([&] { why = commErrorOf([&] { g.clients[0]->barrier("end", 3000ms); }); });
  std::this_thread::sleep_for(100ms);
  g.clients[1]->leave();
  waiter.join();
  CHECK(why ==
        "barrier 'end' cannot complete: rank 1 (host host0, pid 1001) left the run before reaching it");
}

TEST_CASE("rendezvous: a worker of an earlier generation is refused; the new group is served") {
  LogCapture log;
  RendezvousServer server(serverConfig({1}, &log));
  server.start();
  // Generation 1: a hand-driven worker joins and leaves.
  RawPeer old(endpointOf(server));
  old.send(1, wire::Join{joinRequest(0, 0)});
  auto welcome = old.receive();
  REQUIRE(welcome.has_value());
  REQUIRE(std::holds_alternative<wire::Welcome>(welcome->body));
  CHECK(std::get<wire::Welcome>(welcome->body).membership.generation == 1);
  wire::Leave leave;
  leave.generation = 1;
  old.send(2, leave);
  REQUIRE(old.receive().has_value());
  CHECK(waitUntil([&] { return server.allLeft(); }, 1000ms));

  // Generation 2 forms; the old worker's requests are stale.
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}});
  CHECK(g.members[0].generation == 2);
  CHECK(server.generation() == 2);
  CHECK_FALSE(server.allLeft());
  wire::Set stale;
  stale.generation = 1;
  stale.key = "k";
  stale.value = bytesOf("old");
  old.send(3, stale);
  CHECK(old.refusal() ==
        "stale generation 1, the run is at 2: this worker belongs to an earlier group and must rejoin");
  CHECK(log.find("stale generation 1, the run is at 2").has_value());
  CHECK_FALSE(g.clients[0]->check("k"));
  g.clients[0]->set("k", bytesOf("new"));
  CHECK(textOf(g.clients[0]->get("k", 100ms)) == "new");
}

TEST_CASE("rendezvous: keys do not outlive their generation") {
  RendezvousServer server(serverConfig({1}));
  server.start();
  {
    JoinedGroup first = joinAll(endpointOf(server), {{0, 0}});
    first.clients[0]->set("addr", bytesOf("old"));
    first.clients[0]->leave();
  }
  JoinedGroup second = joinAll(endpointOf(server), {{0, 0}});
  CHECK(second.members[0].generation == 2);
  CHECK_FALSE(second.clients[0]->check("addr"));
}
