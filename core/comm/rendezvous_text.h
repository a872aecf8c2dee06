// Small formatting helpers shared by the rendezvous messages, so the server
// and the client word durations and names the same way.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "core/comm/rendezvous_types.h"

namespace dtrain {

// 1500 ms -> "1.5 s"
inline std::string secondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// A key or barrier name as the messages show it: 'name'.
inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

// "rank 3 (host B, pid 1234)"
inline std::string describePeer(int rank, const PeerInfo& p) {
  return "rank " + std::to_string(rank) + " (host " + p.host + ", pid " + std::to_string(p.pid) + ")";
}

}  // namespace dtrain
