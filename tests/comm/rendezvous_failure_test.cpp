// Failures reach every rank in time and with a reason: a rank that stops
// heartbeating, a coordinator that goes away, a rank that aborts. A rank that
// leaves cleanly is not a failure.
#include <doctest/doctest.h>

#include <condition_variable>

#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Records the first abort reason a client reports and when.
class AbortRecorder {
 public:
  std::function<void(const std::string&)> callback() {
    return [this](const std::string& reason) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++calls_;
      if (!reason_) {
        reason_ = reason;
        when_ = Clock::now();
      }
      changed_.notify_all();
    };
  }
  // The reason, waiting up to `timeout` for it.
  std::optional<std::string> wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return reason_.has_value(); });
    return reason_;
  }
  Clock::time_point when() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return when_;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::string> reason_;
  Clock::time_point when_;
  int calls_ = 0;
};

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

TEST_CASE("rendezvous failure: a rank that stops heartbeating is lost, and every other rank hears it") {
  LogCapture log;
  RendezvousServerConfig config = serverConfig({3}, &log);
  config.heartbeat_timeout = 500ms;
  RendezvousServer server(config);
  server.start();
  // Rank 2 joins by hand and then says nothing more.
  RawPeer silent(endpointOf(server));
  silent.send(1, wire::Join{joinRequest(0, 2)});
  silent.send(2, wire::Heartbeat{});
  REQUIRE(silent.receive().has_value());

  std::vector<std::unique_ptr<RendezvousClient>> clients;
  AbortRecorder heard[2];
  for (int slot = 0; slot < 2; ++slot) {
    clients.push_back(
        std::make_unique<RendezvousClient>(endpointOf(server), joinRequest(0, slot), fastTimeouts()));
    clients.back()->onAbort(heard[slot].callback());
  }
  // The group forms between these two instants; the silent rank was last heard before both.
  auto joining = Clock::now();
  std::thread other([&] { clients[1]->join(); });
  clients[0]->join();
  other.join();
  auto formed = Clock::now();

  const std::string expected = "lost rank 2 (host host0, pid 1002): no heartbeat for 0.5 s";
  for (auto& h : heard) {
    auto reason = h.wait(3000ms);
    REQUIRE(reason.has_value());
    CHECK(*reason == expected);
    CHECK(secondsBetween(joining, h.when()) >= 0.5);
    CHECK(secondsBetween(formed, h.when()) < 0.5 + 1.0);
    CHECK(h.calls() == 1);
  }
  CHECK(server.aborted() == expected);
  CHECK(log.find("aborting generation 1: " + expected).has_value());
  // Everything afterwards fails with the same reason.
  CHECK(commErrorOf([&] { clients[0]->set("k", bytesOf("v")); }) == expected);
  CHECK(clients[1]->abortReason() == expected);
  // The silent rank is told too, should it come back.
  bool told = false;
  for (int i = 0; i < 3 && !told; ++i) {
    auto m = silent.receive(500ms);
    if (m && std::holds_alternative<wire::AbortNotice>(m->body))
      told = std::get<wire::AbortNotice>(m->body).reason == expected;
  }
  CHECK(told);
}

TEST_CASE("rendezvous failure: workers notice a lost coordinator within their heartbeat timeout") {
  auto server = std::make_unique<RendezvousServer>(serverConfig({2}));
  server->start();
  std::string endpoint = endpointOf(*server);
  ClientTimeouts t = fastTimeouts();
  t.heartbeat_timeout = 500ms;
  JoinedGroup g = joinAll(endpoint, {{0, 0}, {0, 1}}, t);
  AbortRecorder heard[2];
  for (int r = 0; r < 2; ++r) g.clients[r]->onAbort(heard[r].callback());
  std::this_thread::sleep_for(700ms);  // longer than the timeout: heartbeats keep both alive
  CHECK_FALSE(g.clients[0]->abortReason().has_value());

  auto gone = Clock::now();
  server.reset();
  const std::string expected = "lost the coordinator at " + endpoint + ": no reply for 0.5 s";
  for (auto& h : heard) {
    auto reason = h.wait(3000ms);
    REQUIRE(reason.has_value());
    CHECK(*reason == expected);
    CHECK(secondsBetween(gone, h.when()) < 0.5 + 1.0);
  }
  CHECK(commErrorOf([&] { g.clients[1]->get("k", 1000ms); }) == expected);
}

TEST_CASE("rendezvous failure: an abort from one rank reaches the others with its reason") {
  RendezvousServer server(serverConfig({2, 1}));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}, {1, 0}});
  AbortRecorder heard[3];
  for (int r = 0; r < 3; ++r) g.clients[r]->onAbort(heard[r].callback());

  // A read parked on the coordinator fails at once, not at its deadline.
  std::string parked_error;
  auto t0 = Clock::now();
  std::thread reader([&] { parked_error = commErrorOf([&] { g.clients[2]->get("never", 5000ms); }); });
  std::this_thread::sleep_for(100ms);
  g.clients[1]->abort("CUDA out of memory on GPU 0");
  reader.join();

  const std::string expected = "rank 1 (host host0) aborted the run: CUDA out of memory on GPU 0";
  CHECK(parked_error.find(expected) != std::string::npos);
  CHECK(secondsBetween(t0, Clock::now()) < 2.0);
  for (int r : {0, 2}) {
    auto reason = heard[r].wait(2000ms);
    REQUIRE(reason.has_value());
    CHECK(*reason == expected);
  }
  CHECK(heard[1].calls() == 0);  // the origin knows already
  CHECK(commErrorOf([&] { g.clients[1]->set("k", bytesOf("v")); }) ==
        "this worker aborted the run: CUDA out of memory on GPU 0");
  CHECK(commErrorOf([&] { g.clients[0]->barrier("b", 1000ms); }) == expected);
  CHECK(server.aborted() == expected);
}

TEST_CASE("rendezvous: ranks that leave are not lost, and the server knows when all have left") {
  RendezvousServerConfig config = serverConfig({2});
  config.heartbeat_timeout = 400ms;
  RendezvousServer server(config);
  server.start();
  ClientTimeouts t = fastTimeouts();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}}, t);
  g.clients[1]->leave();
  CHECK(commErrorOf([&] { g.clients[1]->check("k"); }) ==
        "cannot check a key: this worker has already left the run");
  std::this_thread::sleep_for(900ms);  // more than twice the heartbeat timeout
  CHECK_FALSE(server.aborted().has_value());
  CHECK_FALSE(server.allLeft());
  g.clients[0]->set("after", bytesOf("1"));
  CHECK(g.clients[0]->check("after"));
  g.clients[0]->leave();
  CHECK(waitUntil([&] { return server.allLeft(); }, 1000ms));
  CHECK_FALSE(server.aborted().has_value());
  CHECK_FALSE(g.clients[0]->abortReason().has_value());
}
