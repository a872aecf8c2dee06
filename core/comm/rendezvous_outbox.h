// Outbox: the frames the coordinator's logic decides to send, each addressed
// to a peer's routing id; the server's socket loop sends them. Keeping the
// logic free of sockets lets it be driven (and reasoned about) on its own.
// Ownership: plain values; not thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/wire.h"

namespace dtrain {

struct OutgoingFrame {
  std::string identity;
  std::string frame;
};

class Outbox {
 public:
  void send(const std::string& identity, uint64_t request_id, const wire::Body& body) {
    frames_.push_back({identity, wire::encode(request_id, body)});
  }
  void refuse(const std::string& identity, uint64_t request_id, const std::string& reason) {
    send(identity, request_id, wire::Refused{reason});
  }
  std::vector<OutgoingFrame>& frames() { return frames_; }

 private:
  std::vector<OutgoingFrame> frames_;
};

}  // namespace dtrain
