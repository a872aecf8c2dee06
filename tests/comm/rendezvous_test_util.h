// Helpers for the rendezvous tests: a coordinator on an ephemeral loopback
// port with short timeouts and a captured log, workers joining from threads,
// and a raw DEALER that sends hand-built (or broken) frames.
#pragma once
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/comm/rendezvous_client.h"
#include "core/comm/rendezvous_server.h"
#include "core/comm/wire.h"

namespace dtrain::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline const std::string kJob = "job-7";
inline const std::string kToken = "s3cret-token";

// Thread-safe copy of the coordinator's log lines.
class LogCapture {
 public:
  RendezvousLog sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(line);
    };
  }
  // The first line containing `text`, waiting up to `timeout` for it.
  std::optional<std::string> find(const std::string& text, std::chrono::milliseconds timeout = 0ms) const {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const std::string& l : lines_)
          if (l.find(text) != std::string::npos) return l;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(10ms);
    }
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// Node i is "10.0.0.<i+1>" with slots[i] workers.
inline RendezvousServerConfig serverConfig(const std::vector<int>& slots, LogCapture* log = nullptr) {
  RendezvousServerConfig c;
  c.bind = "tcp://127.0.0.1:0";
  c.job_id = kJob;
  c.token = kToken;
  for (size_t i = 0; i < slots.size(); ++i) c.nodes.push_back({"10.0.0." + std::to_string(i + 1), slots[i]});
  c.join_timeout = 5000ms;
  c.heartbeat_timeout = 2000ms;
  c.progress_interval = 5000ms;
  if (log) c.log = log->sink();
  return c;
}

inline std::string endpointOf(const RendezvousServer& server) {
  return "tcp://127.0.0.1:" + std::to_string(server.port());
}

inline JoinRequest joinRequest(int node, int slot) {
  JoinRequest r;
  r.job_id = kJob;
  r.token = kToken;
  r.host = "host" + std::to_string(node);
  r.node = node;
  r.slot = slot;
  r.pid = 1000 + 10 * node + slot;
  r.local_devices = 2;
  return r;
}

inline ClientTimeouts fastTimeouts() {
  ClientTimeouts t;
  t.join = 5000ms;
  t.heartbeat_interval = 50ms;
  t.heartbeat_timeout = 2000ms;
  return t;
}

// Polls `done` every 5 ms up to `timeout`; true when it held.
inline bool waitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Clients for the given (node, slot) pairs, joined from one thread each.
struct JoinedGroup {
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  std::vector<Membership> members;
};

inline JoinedGroup joinAll(const std::string& endpoint, const std::vector<std::pair<int, int>>& where,
                           ClientTimeouts timeouts = fastTimeouts()) {
  JoinedGroup g;
  for (auto [node, slot] : where)
    g.clients.push_back(std::make_unique<RendezvousClient>(endpoint, joinRequest(node, slot), timeouts));
  g.members.resize(where.size());
  std::vector<std::string> errors(where.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < where.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        g.members[i] = g.clients[i]->join();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  return g;
}

// A hand-driven DEALER: sends any bytes, reads the coordinator's frames.
class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint) : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  void send(const std::string& frame) { socket_.send(zmq::buffer(frame), zmq::send_flags::none); }
  void sendParts(const std::vector<std::string>& parts) {
    for (size_t i = 0; i < parts.size(); ++i)
      socket_.send(zmq::buffer(parts[i]),
                   i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  void send(uint64_t request_id, const wire::Body& body) { send(wire::encode(request_id, body)); }
  // The next frame, decoded; nullopt when none arrives in time.
  std::optional<wire::Message> receive(std::chrono::milliseconds timeout = 2000ms) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    zmq::message_t frame;
    if (!socket_.recv(frame)) return std::nullopt;
    return wire::decode(frame.data(), frame.size());
  }
  // The next Refused answer's reason (fails the test on anything else).
  std::string refusal(std::chrono::milliseconds timeout = 2000ms) {
    auto m = receive(timeout);
    REQUIRE(m.has_value());
    auto* r = std::get_if<wire::Refused>(&m->body);
    REQUIRE_MESSAGE(r != nullptr,
                    "expected a refusal, got '" << wire::messageTypeName(wire::typeOf(m->body)) << "'");
    return r->reason;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

// What a CommError from `f` says; fails the test when `f` does not throw one.
template <class F>
std::string commErrorOf(F&& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  FAIL("expected a CommError");
  return "";
}

inline Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string textOf(const Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace dtrain::test
