#include "core/comm/rendezvous_channel.h"

#include <cerrno>
#include <utility>
#include <vector>

#include "core/comm/rendezvous_socket.h"
#include "core/comm/rendezvous_text.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// The longest the I/O thread sleeps: the resolution of heartbeats, of the
// silence check and of shutdown (requests wake it at once).
constexpr std::chrono::milliseconds kTick{20};
// Heartbeats are numbered apart from calls, so their answers are recognised
// even when no call waits for them.
constexpr uint64_t kHeartbeatIdBit = uint64_t{1} << 63;
constexpr const char* kWakeEndpoint = "inproc://rendezvous-channel-wake";

}  // namespace

RendezvousChannel::RendezvousChannel(std::string endpoint, std::string routing_id, ClientTimeouts timeouts)
    : endpoint_(std::move(endpoint)),
      timeouts_(timeouts),
      context_(1),
      dealer_(context_, zmq::socket_type::dealer),
      wake_rx_(context_, zmq::socket_type::pair),
      wake_tx_(context_, zmq::socket_type::pair) {
  setCommonSocketOptions(dealer_);
  // A fixed routing id lets the coordinator recognise this worker after ZeroMQ reconnects.
  dealer_.set(zmq::sockopt::routing_id, routing_id);
  connectOrExplain(dealer_, endpoint_);
  wake_rx_.set(zmq::sockopt::linger, 0);
  wake_tx_.set(zmq::sockopt::linger, 0);
  wake_rx_.bind(kWakeEndpoint);
  wake_tx_.connect(kWakeEndpoint);
  thread_ = std::thread([this] { serve(); });
}

RendezvousChannel::~RendezvousChannel() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_tx_.send(zmq::str_buffer("w"), zmq::send_flags::dontwait);
  }
  thread_.join();
  // Callers still waiting (none should, but a destructor must not strand them).
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, call] : pending_) {
    call->failure = "the connection to the coordinator at " + endpoint_ + " was closed";
    call->done = true;
  }
  answered_.notify_all();
}

wire::Body RendezvousChannel::call(const wire::Body& body, RendezvousClock::time_point deadline,
                                   std::chrono::milliseconds grace,
                                   const std::function<std::string()>& timeout_message) {
  auto pending = std::make_shared<PendingCall>();
  std::unique_lock<std::mutex> lock(mutex_);
  if (abort_reason_) throw CommError(*abort_reason_);
  uint64_t id = next_request_id_++;
  lock.unlock();
  std::string frame = wire::encode(id, body);  // may be large: not under the lock
  lock.lock();
  if (abort_reason_) throw CommError(*abort_reason_);
  pending_[id] = pending;
  outbox_.emplace_back(id, std::move(frame));
  wake_tx_.send(zmq::str_buffer("w"), zmq::send_flags::dontwait);  // a full wake queue already wakes it
  auto answered = [&] { return pending->done; };
  if (!answered_.wait_until(lock, deadline, answered) &&
      !(heard_ && answered_.wait_until(lock, deadline + grace, answered))) {
    pending_.erase(id);
    lock.unlock();
    throw CommError(timeout_message());
  }
  lock.unlock();
  if (pending->failure) throw CommError(*pending->failure);
  if (auto* refused = std::get_if<wire::Refused>(&pending->reply)) throw CommError(refused->reason);
  return std::move(pending->reply);
}

void RendezvousChannel::startHeartbeats(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  beating_ = true;
  generation_ = generation;
}

void RendezvousChannel::stopHeartbeats() {
  std::lock_guard<std::mutex> lock(mutex_);
  beating_ = false;
}

void RendezvousChannel::abortLocally(const std::string& reason) { abort(reason, false); }

std::optional<std::string> RendezvousChannel::abortReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abort_reason_;
}

void RendezvousChannel::setAbortHandler(AbortHandler handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_abort_ = std::move(handler);
}

void RendezvousChannel::setRegroupHandler(RegroupHandler handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_regroup_ = std::move(handler);
}

std::optional<std::string> RendezvousChannel::regroupReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return regroup_reason_;
}

void RendezvousChannel::abort(const std::string& reason, bool notify) {
  AbortHandler handler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_reason_) return;
    abort_reason_ = reason;
    beating_ = false;
    for (auto& [id, call] : pending_) {
      call->failure = reason;
      call->done = true;
    }
    pending_.clear();
    outbox_.clear();
    if (notify) handler = on_abort_;
  }
  answered_.notify_all();
  if (handler) handler(reason);
}

void RendezvousChannel::failPending(uint64_t request_id, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) return;
    it->second->failure = reason;
    it->second->done = true;
    pending_.erase(it);
  }
  answered_.notify_all();
}

void RendezvousChannel::serve() {
  zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0}, {wake_rx_.handle(), 0, ZMQ_POLLIN, 0}};
  last_heard_ = next_beat_ = RendezvousClock::now();
  if (timeouts_.coordinator_known) heard_ = true;
  while (!stopping_) {
    try {
      zmq::poll(items, 2, kTick);
      zmq::message_t drained;
      while (wake_rx_.recv(drained, zmq::recv_flags::dontwait)) {
      }
      sendQueued();
      auto now = RendezvousClock::now();
      receiveAll(now);
      beatAndWatch(now);
    } catch (const zmq::error_t& e) {
      // A signal (SIGCHLD from a launcher, say) interrupted a wait: just go on.
      if (e.num() == EINTR) continue;
      abort("the connection to the coordinator at " + endpoint_ + " failed: " + e.what(), true);
      return;
    } catch (const std::exception& e) {
      // The socket itself failed: nothing more will reach the coordinator.
      abort("the connection to the coordinator at " + endpoint_ + " failed: " + e.what(), true);
      return;
    }
  }
}

void RendezvousChannel::sendQueued() {
  std::deque<std::pair<uint64_t, std::string>> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued.swap(outbox_);
  }
  for (auto& [id, frame] : queued) {
    std::string failure;
    try {
      if (!dealer_.send(zmq::buffer(frame), zmq::send_flags::dontwait))
        failure = "too many messages are queued for it (is it running and reachable?)";
    } catch (const zmq::error_t& e) {
      failure = e.what();
    }
    if (!failure.empty()) failPending(id, "cannot send to the coordinator at " + endpoint_ + ": " + failure);
  }
}

void RendezvousChannel::receiveAll(RendezvousClock::time_point now) {
  for (;;) {
    zmq::message_t frame;
    if (!dealer_.recv(frame, zmq::recv_flags::dontwait)) return;
    heard_ = true;
    last_heard_ = now;
    wire::Message message;
    try {
      message = wire::decode(frame.data(), frame.size());
    } catch (const wire::WireError& e) {
      // We cannot tell which call it answers: a coordinator we do not understand
      // cannot coordinate this worker.
      std::string why = e.what();
      try {
        wire::Header h = wire::decodeHeader(frame.data(), frame.size());
        if (h.version != wire::kProtocolVersion)
          why = "it speaks rendezvous protocol version " + std::to_string(h.version) +
                " and this worker speaks " + std::to_string(wire::kProtocolVersion) +
                ": run the same dtrain version on every host";
      } catch (const wire::WireError&) {
      }
      abort("cannot understand the coordinator at " + endpoint_ + ": " + why, true);
      return;
    }
    dispatch(message);
  }
}

void RendezvousChannel::dispatch(const wire::Message& message) {
  if (auto* notice = std::get_if<wire::AbortNotice>(&message.body)) {
    abort(notice->reason, true);
    return;
  }
  if (auto* notice = std::get_if<wire::RegroupNotice>(&message.body)) {
    RegroupHandler handler;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (regroup_reason_ || abort_reason_) return;
      regroup_reason_ = notice->reason;
      handler = on_regroup_;
    }
    next_beat_ = RendezvousClock::now();  // the answer: this worker is alive
    if (handler) handler(notice->reason);
    return;
  }
  if (message.request_id & kHeartbeatIdBit) {
    // A refused heartbeat of a formed group: the coordinator has dropped us
    // (lost, aborted, restarted); nothing this worker does can succeed now.
    auto* refused = std::get_if<wire::Refused>(&message.body);
    bool joined = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      joined = beating_ && generation_ > 0 && !regroup_reason_;
    }
    if (refused && joined)
      abort("the coordinator at " + endpoint_ + " dropped this worker: " + refused->reason, true);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(message.request_id);
    if (it == pending_.end()) return;  // its caller gave up waiting
    it->second->reply = message.body;
    it->second->done = true;
    pending_.erase(it);
  }
  answered_.notify_all();
}

void RendezvousChannel::beatAndWatch(RendezvousClock::time_point now) {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!beating_) {
      next_beat_ = now + timeouts_.heartbeat_interval;
      return;
    }
    generation = generation_;
  }
  if (heard_ && now - last_heard_ > timeouts_.heartbeat_timeout) {
    abort(
        "lost the coordinator at " + endpoint_ + ": no reply for " + secondsText(timeouts_.heartbeat_timeout),
        true);
    return;
  }
  if (now < next_beat_) return;
  next_beat_ = now + timeouts_.heartbeat_interval;
  wire::Heartbeat beat;
  beat.generation = generation;
  std::string frame = wire::encode(kHeartbeatIdBit | next_beat_id_++, beat);
  dealer_.send(zmq::buffer(frame), zmq::send_flags::dontwait);  // a full queue drops it; silence will tell
}

}  // namespace dtrain
