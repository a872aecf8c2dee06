#include "core/comm/gloo_failure_diagnosis.h"

#include <gloo/common/error.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <new>

#include "core/errors.h"

namespace dtrain {

namespace {

// The slot prefix of the zero-byte notices that find broken connections;
// Gloo's own collectives use prefixes 0x01 to 0x08.
constexpr uint8_t kProbeSlotPrefix = 0xd7;

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

std::string ranksText(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  const auto host = [&](int r) {
    return r >= 0 && static_cast<size_t>(r) < hosts.size() ? hosts[static_cast<size_t>(r)] : std::string();
  };
  bool one_host = !ranks.empty() && !host(ranks[0]).empty();
  for (int r : ranks) one_host = one_host && host(r) == host(ranks[0]);
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
    if (!one_host && !host(ranks[i]).empty()) out += " (host " + host(ranks[i]) + ")";
  }
  return one_host ? out + " (host " + host(ranks[0]) + ")" : out;
}

std::string withoutSourceLocation(const std::string& message) {
  if (message.empty() || message[0] != '[') return message;
  size_t end = message.find("] ");
  return end == std::string::npos ? message : message.substr(end + 2);
}

std::string explainGlooFailure(std::exception_ptr error, std::chrono::milliseconds timeout,
                               const std::function<std::vector<int>()>& suspects,
                               const std::vector<std::string>& hosts) {
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    message = e.what();
  } catch (const gloo::EnforceNotMet& e) {
    return std::string("gloo's internal check failed: ") + withoutSourceLocation(e.what());
  } catch (const gloo::Exception& e) {
    message = e.what();
  } catch (const CommError& e) {
    return e.what();  // from the store
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& e) {
    return e.what();
  }

  const std::string waited = durationText(timeout);
  if (contains(message, "Connect timeout"))
    return "no connection within " + durationText(timeout * 5) +
           " (a rank stopped while connecting, or a firewall is in between?)";
  const bool timedOut = contains(message, "timeout") || contains(message, "Timed out");
  const bool closed = contains(message, "closed") || contains(message, "reset by peer") ||
                      contains(message, "Broken pipe") || contains(message, "Read error");
  std::vector<int> peers = suspects();
  if (timedOut) {
    // A timed-out wait closes the one connection it waited on; a timed-out
    // per-call collective closes them all, and then no one rank is to blame.
    if (peers.size() == 1) return "timed out after " + waited + " waiting for " + ranksText(peers, hosts);
    return "timed out after " + waited + " (a rank did not take part in time)";
  }
  if (closed) {
    if (peers.empty()) return "a connection closed (peer process gone?)";
    return (peers.size() == 1 ? "connection to " : "connections to ") + ranksText(peers, hosts) +
           (peers.size() == 1 ? " closed (peer process gone?)" : " closed (peer processes gone?)");
  }
  return "network error: " + withoutSourceLocation(message);
}

std::vector<int> findBrokenPeers(gloo::Context& context) {
  std::vector<int> broken;
  char nothing = 0;
  try {
    auto probe = context.createUnboundBuffer(&nothing, 0);
    const uint64_t slot = gloo::Slot::build(kProbeSlotPrefix, 0);
    for (int r = 0; r < context.size; ++r) {
      if (r == context.rank) continue;
      try {
        context.getPair(r)->send(probe.get(), slot, 0, 0);
      } catch (const std::exception&) {
        broken.push_back(r);
      }
    }
  } catch (const std::exception&) {
    // Could not even try: name no one.
  }
  return broken;
}

}  // namespace dtrain
