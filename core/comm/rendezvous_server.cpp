#include "core/comm/rendezvous_server.h"

#include <cerrno>
#include <chrono>
#include <iterator>
#include <utility>
#include <vector>
#include <zmq_addon.hpp>

#include "core/comm/rendezvous_socket.h"

namespace dtrain {

namespace {

// How long the loop sleeps in poll when nothing arrives: the resolution of
// every deadline (heartbeats, joins, parked reads) and of stop().
constexpr std::chrono::milliseconds kTick{20};
// Messages handled before deadlines are looked at again, so a flood cannot starve them.
constexpr int kMessagesPerTick = 1000;

}  // namespace

RendezvousServer::RendezvousServer(RendezvousServerConfig config)
    : config_(std::move(config)),
      coordinator_(config_),
      context_(1),
      router_(context_, zmq::socket_type::router) {
  setCommonSocketOptions(router_);
  // A worker that reconnects under its routing id takes over its old connection.
  router_.set(zmq::sockopt::router_handover, 1);
  bindOrExplain(router_, config_.bind);
  port_ = boundPort(router_);
}

RendezvousServer::~RendezvousServer() { stop(); }

void RendezvousServer::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { serve(); });
}

void RendezvousServer::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool RendezvousServer::formed() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_.formed;
}

uint64_t RendezvousServer::generation() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_.generation;
}

std::optional<std::string> RendezvousServer::aborted() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_.failure;
}

bool RendezvousServer::allLeft() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_.all_left;
}

void RendezvousServer::reportLost(int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(status_mutex_);
  reported_lost_.emplace_back(rank, why);
}

void RendezvousServer::reportLostProcess(int node, int pid, const std::string& why) {
  std::lock_guard<std::mutex> lock(status_mutex_);
  reported_lost_processes_.push_back(LostProcess{node, pid, why});
}

RendezvousStatus RendezvousServer::status() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_;
}

std::vector<int> RendezvousServer::lostRanks() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return status_.lost;
}

void RendezvousServer::log(const std::string& line) const {
  if (config_.log) config_.log(line);
}

void RendezvousServer::serve() {
  while (!stopping_) {
    try {
      serveOnce();
    } catch (const zmq::error_t& e) {
      // A signal (the launcher's SIGCHLD, say) interrupted a wait: just go on.
      if (e.num() != EINTR) log(std::string("rendezvous server error: ") + e.what());
    } catch (const std::exception& e) {
      // A failure of one round (a socket error, memory) must not take the
      // coordinator down with every worker's run: report it and go on.
      log(std::string("rendezvous server error: ") + e.what());
    }
  }
}

void RendezvousServer::serveOnce() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 1, kTick);
  Outbox out;
  for (int i = 0; i < kMessagesPerTick; ++i) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(router_, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
    auto now = RendezvousClock::now();
    std::string identity = parts.front().to_string();
    if (parts.size() != 2)
      coordinator_.refuseMalformed(
          identity, "a rendezvous message is one frame, this one had " + std::to_string(parts.size() - 1),
          out);
    else
      coordinator_.handle(identity, parts[1].data(), parts[1].size(), now, out);
    publishStatus();
    sendAll(out);
  }
  std::vector<std::pair<int, std::string>> lost;
  std::vector<LostProcess> lost_processes;
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    lost.swap(reported_lost_);
    lost_processes.swap(reported_lost_processes_);
  }
  for (const auto& [rank, why] : lost) coordinator_.lose(rank, why, out);
  for (const LostProcess& p : lost_processes)
    coordinator_.loseProcess(p.node, p.pid, p.why, RendezvousClock::now(), out);
  coordinator_.tick(RendezvousClock::now(), out);
  publishStatus();
  sendAll(out);
}

// Before the answers go out, so a worker that has its answer sees a status that includes it.
void RendezvousServer::publishStatus() {
  RendezvousStatus status = coordinator_.status();
  std::lock_guard<std::mutex> lock(status_mutex_);
  status_ = std::move(status);
}

void RendezvousServer::sendAll(Outbox& out) {
  for (OutgoingFrame& f : out.frames()) {
    // Never blocks: a peer that is gone, or too slow to read, loses the frame
    // (its heartbeat deadline will tell). One failed send loses only its frame.
    try {
      if (!router_.send(zmq::buffer(f.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        continue;
      router_.send(zmq::buffer(f.frame), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      log(std::string("rendezvous server could not send a message: ") + e.what());
    }
  }
  out.frames().clear();
}

}  // namespace dtrain
