#include "core/comm/gloo_connection_setup.h"

#include <gloo/barrier.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <system_error>
#include <vector>

#include "core/comm/gloo_failure_diagnosis.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// Gloo's TCP pair sets a socket's send buffer (SO_SNDBUF) to the size of the
// first message an algorithm object sends on it, and later only grows it;
// Gloo's per-call collectives never touch it. When that first message is a
// ring's 4-byte notice, the buffer is pinned near the kernel's minimum
// (4.6 KB) and a later 4 MB broadcast on that connection moves at a delayed
// ACK per few KB: 0.3 to 2 s instead of 3 ms, measured on loopback. So every
// rank first sends this much to every peer, which sizes every buffer (the
// kernel doubles it) before anything small can.
constexpr int64_t kFirstMessageBytes = 256 << 10;

// Why no socket can listen on `address` ("" when one can). Trying this first
// gives a plain reason for an address that is not this host's, and keeps
// clear of Gloo's own failure path there, which leaks its address lookup.
std::string whyCannotListenOn(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &found); rc != 0) return ::gai_strerror(rc);
  std::string why = "no usable address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    bool bound = fd >= 0 && ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!bound) why = std::error_code(errno, std::generic_category()).message();
    if (fd >= 0) ::close(fd);
    if (bound) {
      why.clear();
      break;
    }
  }
  ::freeaddrinfo(found);
  return why;
}

}  // namespace

std::shared_ptr<gloo::transport::Device> listenOn(const std::string& address, const std::string& who) {
  if (std::string why = whyCannotListenOn(address); !why.empty())
    throw CommError(who + ": cannot listen on address '" + address + "' (" + why +
                    "); it must be an address of this host");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(who + ": cannot listen on address '" + address + "' (" + withoutSourceLocation(e.what()) +
                    "); it must be an address of this host");
  }
}

void awaitEveryRankJoined(Store& store, int rank, int size, const std::string& prefix,
                          std::chrono::milliseconds timeout, const std::string& who,
                          const std::vector<std::string>& hosts) {
  // Our own keys, before Gloo's: a rank that never comes is named here, and
  // a prefix left by an earlier group (whose addresses are stale) is refused.
  auto joinedKey = [&](int r) { return prefix + "/joined/" + std::to_string(r); };
  if (store.check(joinedKey(rank)))
    throw CommError(who + ": the store already holds a group under the prefix '" + prefix +
                    "' (give each group its own prefix, e.g. with the run's generation)");
  store.set(joinedKey(rank), Bytes{1});
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(joinedKey(r));
  try {
    store.wait(keys, timeout);
  } catch (const CommError&) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!store.check(joinedKey(r))) missing.push_back(r);
    if (missing.empty()) return;  // the last one came just after the deadline
    throw CommError(who + ": " + ranksText(missing, hosts) + " did not join within " + durationText(timeout) +
                    " (is every rank started, with the same store, size and prefix '" + prefix + "'?)");
  }
}

void primeSendBuffers(const std::shared_ptr<gloo::Context>& context, std::chrono::milliseconds timeout,
                      uint32_t barrier_tag) {
  const int rank = context->rank, size = context->size;
  std::vector<char> outgoing(kFirstMessageBytes);
  std::vector<char> incoming(static_cast<size_t>(kFirstMessageBytes) * static_cast<size_t>(size));
  const int slot = context->nextSlot();
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto& pair = context->getPair(peer);
    sends.push_back(pair->createSendBuffer(slot, outgoing.data(), kFirstMessageBytes));
    receives.push_back(
        pair->createRecvBuffer(slot, incoming.data() + peer * kFirstMessageBytes, kFirstMessageBytes));
  }
  // Gloo's per-call barrier sends nothing through an algorithm object, so it
  // cannot pin a buffer. After it everyone's receive buffers (and those of
  // the group's kept barrier) exist.
  gloo::BarrierOptions opts(context);
  opts.setTag(barrier_tag);
  opts.setTimeout(timeout);
  gloo::barrier(opts);
  for (auto& send : sends) send->send();
  for (auto& receive : receives) receive->waitRecv();
  for (auto& send : sends) send->waitSend();
}

}  // namespace dtrain
