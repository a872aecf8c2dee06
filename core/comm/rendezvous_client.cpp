#include "core/comm/rendezvous_client.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <utility>

#include "core/comm/rendezvous_text.h"
#include "core/errors.h"

namespace dtrain {

namespace {

using std::chrono::milliseconds;

// Extra time a worker gives a coordinator it has heard from to answer a
// request the coordinator holds to a deadline itself, so that answer (which
// names what is missing) arrives before the worker's own, vaguer, timeout.
constexpr milliseconds kAnswerGrace{2000};

// Unique per client object, so a second worker in the same process (or a
// restarted one) is never mistaken for this one after a reconnect.
std::string makeRoutingId(const JoinRequest& r) {
  std::random_device device;
  char tag[24];
  std::snprintf(tag, sizeof tag, "%08x%08x", device(), device());
  return "w" + std::to_string(r.node) + "." + std::to_string(r.slot) + "." + std::to_string(r.pid) + "." +
         tag;
}

uint32_t timeoutMs(milliseconds timeout) {
  auto ms = std::max<int64_t>(0, timeout.count());
  return static_cast<uint32_t>(std::min<int64_t>(ms, std::numeric_limits<uint32_t>::max()));
}

template <class T>
const T& expectAnswer(const wire::Body& answer, const std::string& what) {
  if (const T* t = std::get_if<T>(&answer)) return *t;
  throw CommError(std::string("the coordinator answered ") + what + " with an unexpected '" +
                  wire::messageTypeName(wire::typeOf(answer)) +
                  "' message (are all hosts on the same dtrain version?)");
}

}  // namespace

RendezvousClient::RendezvousClient(std::string coordinator, JoinRequest request, ClientTimeouts timeouts)
    : coordinator_(std::move(coordinator)),
      request_(std::move(request)),
      timeouts_(timeouts),
      channel_(coordinator_, makeRoutingId(request_), timeouts_) {
  if (timeouts_.heartbeat_interval.count() <= 0 ||
      timeouts_.heartbeat_timeout <= timeouts_.heartbeat_interval)
    throw CommError("the heartbeat timeout (" + secondsText(timeouts_.heartbeat_timeout) +
                    ") must be longer than the heartbeat interval (" +
                    secondsText(timeouts_.heartbeat_interval) + "), and the interval positive");
}

RendezvousClient::~RendezvousClient() = default;

Membership RendezvousClient::join() {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (joined_) return membership_;
  }
  // Beat while waiting, so the coordinator's answers show it is alive.
  channel_.startHeartbeats(0);
  auto deadline = RendezvousClock::now() + timeouts_.join;
  Membership m;
  try {
    wire::Body answer = channel_.call(wire::Join{request_}, deadline, kAnswerGrace, [&] {
      if (!channel_.heardFromCoordinator())
        return "no answer from the coordinator at " + coordinator_ + " within " +
               secondsText(timeouts_.join) + ": is dtrain running on node 0, and can host " + request_.host +
               " reach that address?";
      return "the group did not form within " + secondsText(timeouts_.join) + " (the coordinator at " +
             coordinator_ + " did not say who is missing)";
    });
    m = expectAnswer<wire::Welcome>(answer, "a join").membership;
    if (m.rank < 0 || m.rank >= m.world_size || static_cast<int>(m.peers.size()) != m.world_size)
      throw CommError("the coordinator at " + coordinator_ + " sent an inconsistent group: rank " +
                      std::to_string(m.rank) + " of " + std::to_string(m.world_size) + " with " +
                      std::to_string(m.peers.size()) + " peers");
  } catch (const CommError&) {
    channel_.stopHeartbeats();
    throw;
  }
  channel_.startHeartbeats(m.generation);
  std::lock_guard<std::mutex> lock(state_mutex_);
  membership_ = std::move(m);
  joined_ = true;
  return membership_;
}

uint64_t RendezvousClient::activeGeneration(const char* operation) const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (!joined_)
    throw CommError(std::string("cannot ") + operation + ": this worker has not joined the group yet");
  if (left_) throw CommError(std::string("cannot ") + operation + ": this worker has already left the run");
  return membership_.generation;
}

wire::Body RendezvousClient::quickCall(const wire::Body& body, const std::string& what) {
  // A live coordinator answers at once; a dead one is caught by the heartbeat
  // timeout, which ends this wait too.
  auto deadline = RendezvousClock::now() + timeouts_.heartbeat_timeout;
  return channel_.call(body, deadline, kAnswerGrace, [&] {
    return "no answer from the coordinator at " + coordinator_ + " to " + what + " within " +
           secondsText(timeouts_.heartbeat_timeout);
  });
}

wire::Body RendezvousClient::waitingCall(const wire::Body& body, milliseconds timeout,
                                         const std::string& what) {
  auto deadline = RendezvousClock::now() + std::max(timeout, milliseconds(0));
  return channel_.call(body, deadline, kAnswerGrace, [&] {
    return "timed out after " + secondsText(timeout) + " waiting for " + what + " (the coordinator at " +
           coordinator_ + " did not answer)";
  });
}

void RendezvousClient::set(const std::string& key, const Bytes& value) {
  wire::Set m;
  m.generation = activeGeneration("set a key");
  if (key.size() + value.size() + 64 > wire::kMaxMessageBytes)
    throw CommError("cannot set key " + quoted(key) + ": its value is " + std::to_string(value.size()) +
                    " bytes, more than a rendezvous message holds (" +
                    std::to_string(wire::kMaxMessageBytes >> 20) + " MiB)");
  m.key = key;
  m.value = value;
  expectAnswer<wire::Ok>(quickCall(m, "a set of key " + quoted(key)), "a set");
}

Bytes RendezvousClient::get(const std::string& key, milliseconds timeout) {
  wire::Get m;
  m.generation = activeGeneration("get a key");
  m.key = key;
  m.timeout_ms = timeoutMs(timeout);
  wire::Body answer = waitingCall(m, timeout, "key " + quoted(key));
  return expectAnswer<wire::Value>(answer, "a get").value;
}

int64_t RendezvousClient::add(const std::string& key, int64_t delta) {
  wire::Add m;
  m.generation = activeGeneration("add to a key");
  m.key = key;
  m.delta = delta;
  return expectAnswer<wire::Number>(quickCall(m, "an add to key " + quoted(key)), "an add").value;
}

void RendezvousClient::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  wire::Wait m;
  m.generation = activeGeneration("wait for keys");
  m.keys = keys;
  m.timeout_ms = timeoutMs(timeout);
  std::string names;
  for (size_t i = 0; i < keys.size(); ++i) names += (i ? ", " : "") + quoted(keys[i]);
  expectAnswer<wire::Ok>(waitingCall(m, timeout, "keys " + names), "a wait");
}

bool RendezvousClient::check(const std::string& key) {
  wire::Check m;
  m.generation = activeGeneration("check a key");
  m.key = key;
  return expectAnswer<wire::Flag>(quickCall(m, "a check of key " + quoted(key)), "a check").value;
}

void RendezvousClient::barrier(const std::string& name, milliseconds timeout) {
  wire::Barrier m;
  m.generation = activeGeneration("enter a barrier");
  m.name = name;
  m.timeout_ms = timeoutMs(timeout);
  expectAnswer<wire::Ok>(waitingCall(m, timeout, "barrier " + quoted(name)), "a barrier");
}

void RendezvousClient::abort(const std::string& reason) {
  if (channel_.abortReason()) return;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (joined_ && !left_) generation = membership_.generation;
  }
  if (generation > 0) {
    wire::Abort m;
    m.generation = generation;
    m.reason = reason;
    // Heartbeats stop first, as for a leave: one answered after the
    // coordinator took the abort comes back refused, which this channel
    // would take for the coordinator's own abort of this worker.
    channel_.stopHeartbeats();
    try {
      // Waits for the acknowledgement so the message is out before this process goes.
      quickCall(m, "an abort");
    } catch (const CommError&) {
      // Best effort: the run is failing already, and a silent rank is found lost.
    }
  }
  channel_.abortLocally("this worker aborted the run: " + reason);
}

void RendezvousClient::leave() {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (!joined_ || left_) return;
  }
  if (channel_.abortReason()) return;  // nothing left to end cleanly
  wire::Leave m;
  m.generation = activeGeneration("leave");
  // Heartbeats stop first: one sent after the Leave would be refused by the
  // coordinator ("already left"), which this channel takes for an abort.
  channel_.stopHeartbeats();
  expectAnswer<wire::Ok>(quickCall(m, "a leave"), "a leave");
  std::lock_guard<std::mutex> lock(state_mutex_);
  left_ = true;
}

void RendezvousClient::onRegroup(std::function<void(const std::string& reason)> callback) {
  channel_.setRegroupHandler(std::move(callback));
}

void RendezvousClient::onAbort(std::function<void(const std::string& reason)> callback) {
  channel_.setAbortHandler(std::move(callback));
}

}  // namespace dtrain
