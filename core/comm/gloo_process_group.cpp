#include "core/comm/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <list>
#include <sstream>
#include <system_error>
#include <utility>

#include "core/comm/gloo_store.h"
#include "core/errors.h"

namespace dtrain {

namespace {

enum class AllReduceAlgorithm { Ring, RingChunked, HalvingDoubling, Bcube };

struct NamedAlgorithm {
  const char* name;
  AllReduceAlgorithm algorithm;
};
constexpr NamedAlgorithm kAlgorithms[] = {{"ring", AllReduceAlgorithm::Ring},
                                          {"ring_chunked", AllReduceAlgorithm::RingChunked},
                                          {"halving_doubling", AllReduceAlgorithm::HalvingDoubling},
                                          {"bcube", AllReduceAlgorithm::Bcube}};

const char* nameOf(AllReduceAlgorithm a) {
  for (const NamedAlgorithm& n : kAlgorithms)
    if (n.algorithm == a) return n.name;
  return "?";
}

bool isKnownOption(const std::string& option) {
  if (option == "auto") return true;
  for (const NamedAlgorithm& n : kAlgorithms)
    if (option == n.name) return true;
  return false;
}

// "auto" picks by message size, from medians of 15-21 runs on loopback with
// 2 and 4 ranks as threads on a 2-core machine (each number below is the
// typical value of three sweeps; the machine was shared, so only clear
// differences were used):
// - Small messages: the plain ring wins. Its p - 1 rounds are one message
//   each, and a small message's time is its message count; the chunked ring
//   sends 2p chunks twice, and halving-doubling and bcube add notices. It
//   moves the whole buffer p - 1 times, though, so it is chosen while
//   (p - 1) x bytes stays under 64 KiB: at 2 ranks it led up to 64 KiB
//   (0.19 ms against 0.27 to 0.44 ms), at 4 ranks up to 16 KiB, and at
//   64 KiB on 4 ranks it was already behind bcube (1.0 to 1.4 ms against 0.7 to 1.3).
// - Up to 4 MiB: halving-doubling, which works for any group size; bcube
//   tied with it but needs the size to be a power of its base, and the
//   chunked ring was behind (4 ranks, 256 KiB: 1.3 to 1.6 ms against 3.4 to 8.4).
// - From 4 MiB: the chunked ring, which keeps both directions of every link
//   busy: 4 ranks, 64 MiB: 206 to 225 ms against 232 to 236 (bcube) and
//   248 to 275 (halving-doubling); at 2 ranks all were within noise.
constexpr int64_t kAutoRingWhileMovedBelow = 64 << 10;
constexpr int64_t kAutoChunkedRingFromBytes = 4 << 20;

AllReduceAlgorithm resolveAlgorithm(const std::string& option, int size, int64_t bytes) {
  for (const NamedAlgorithm& n : kAlgorithms)
    if (option == n.name) return n.algorithm;
  if (int64_t(size - 1) * bytes < kAutoRingWhileMovedBelow) return AllReduceAlgorithm::Ring;
  if (bytes < kAutoChunkedRingFromBytes) return AllReduceAlgorithm::HalvingDoubling;
  return AllReduceAlgorithm::RingChunked;
}

// Gloo's bcube groups ranks base at a time and gives wrong sums unless the
// group size is a power of the base (a group of 6 with base 2 does). The
// smallest base that fits always exists: the size itself (one step, every
// rank exchanging with every other).
int bcubeBaseFor(int size) {
  for (int base = 2; base < size; ++base) {
    int64_t power = base;
    while (power < size) power *= base;
    if (power == size) return base;
  }
  return std::max(size, 2);
}

// Gloo's algorithm objects count elements and bytes in int; one run covers at
// most this many bytes and longer buffers go in pieces.
constexpr int64_t kMaxBytesPerRun = int64_t(1) << 30;

// Building an algorithm object takes slots from the context in turn, and a
// message for a slot lands in whatever is registered there, so all ranks
// must build the same algorithms at the same calls and reuse them together.
// Below this size a call copies its data into memory its cached algorithm
// owns: the cache is then found by the call's shape alone, the same on every
// rank, and the copy costs less than a round trip. From this size up the
// algorithm runs in place on the caller's buffer and is found by the buffer's
// address, which is each rank's own (a freed and reallocated buffer may come
// back anywhere), so the ranks first exchange the id of the entry each found
// and reuse it only when all found the same one; otherwise all rebuild.
constexpr int64_t kInPlaceFromBytes = 1 << 20;
// Bounds on the cache: staged entries by count (each is under 1 MiB of data
// plus Gloo's scratch), in-place entries by count and by the bytes they cover.
constexpr size_t kMaxStagedEntries = 32;
constexpr size_t kMaxInPlaceEntries = 64;
constexpr int64_t kMaxInPlaceBytes = int64_t(1) << 30;

// Gloo's TCP pair sets a socket's send buffer (SO_SNDBUF) to the size of the
// first message an algorithm object sends on it, and later only grows it;
// Gloo's per-call collectives never touch it. When that first message is a
// ring's 4-byte notice, the buffer is pinned near the kernel's minimum
// (4.6 KB) and a later 4 MB broadcast on that connection moves at a delayed
// ACK per few KB: 0.3 to 2 s instead of 3 ms, measured on loopback. So every
// rank first sends this much to every peer, which sizes every buffer (the
// kernel doubles it) before anything small can.
constexpr int64_t kFirstMessageBytes = 256 << 10;

// The slot prefix of the zero-byte notices that find broken connections;
// Gloo's own collectives use prefixes 0x01 to 0x08.
constexpr uint8_t kProbeSlotPrefix = 0xd7;

std::string durationText(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + " ms";
  std::ostringstream out;
  out << static_cast<double>(d.count()) / 1000.0 << " s";
  return out.str();
}

// "1 float", "1001 floats".
std::string countText(int64_t n, const std::string& units) {
  return std::to_string(n) + " " + (n == 1 ? units.substr(0, units.size() - 1) : units);
}

// "rank 2", "ranks 2, 5".
std::string ranksText(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Gloo's messages start with "[file:line] " (or "[enforce fail at file:line] ").
std::string withoutSourceLocation(const std::string& message) {
  if (message.empty() || message[0] != '[') return message;
  size_t end = message.find("] ");
  return end == std::string::npos ? message : message.substr(end + 2);
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

void checkCount(const char* operation, int64_t n) {
  if (n < 0)
    throw CommError(std::string(operation) + ": element count " + std::to_string(n) + " is negative");
}

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

template <typename T>
std::unique_ptr<gloo::Algorithm> makeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, T* data, int count) {
  const std::vector<T*> ptrs{data};
  switch (algorithm) {
    case AllReduceAlgorithm::Ring:
      return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, count);
    case AllReduceAlgorithm::RingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, count);
    case AllReduceAlgorithm::HalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, count);
    case AllReduceAlgorithm::Bcube:
      // The base is read when the algorithm is built; nothing else uses it.
      context->base = bcubeBaseFor(context->size);
      return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, count);
  }
  return nullptr;
}

// Every rank sends one 64-bit value to every other rank and receives theirs.
// Peers are waited on in rank order, so a timeout is on the first rank that
// did not take part. Two sets of buffers take turns, so a rank that starts
// its next exchange early never overwrites a value a slower peer has yet to
// read.
class AllToAllExchange {
 public:
  explicit AllToAllExchange(gloo::Context& context) : rank_(context.rank) {
    for (Round& round : rounds_) {
      const int slot = context.nextSlot();
      round.received.assign(static_cast<size_t>(context.size), 0);  // before buffers point into it
      for (int peer = 0; peer < context.size; ++peer) {
        if (peer == context.rank) continue;
        if (&round == &rounds_[0]) peers_.push_back(peer);
        auto& pair = context.getPair(peer);
        round.sends.push_back(pair->createSendBuffer(slot, &round.mine, sizeof(int64_t)));
        round.receives.push_back(pair->createRecvBuffer(slot, &round.received[peer], sizeof(int64_t)));
      }
    }
  }

  // Collective: every rank's value, by rank. While it waits for a peer,
  // *waiting_for holds that peer's rank (left there if the wait fails, so
  // the error names the rank itself rather than guessing from which
  // connections look broken afterwards); -1 once all have answered.
  std::vector<int64_t> run(int64_t mine, int* waiting_for) {
    Round& round = rounds_[next_];
    next_ ^= 1;
    round.mine = mine;
    for (auto& send : round.sends) send->send();
    for (size_t i = 0; i < round.receives.size(); ++i) {
      *waiting_for = peers_[i];
      round.receives[i]->waitRecv();
    }
    *waiting_for = -1;
    for (auto& send : round.sends) send->waitSend();
    std::vector<int64_t> all = round.received;
    all[static_cast<size_t>(rank_)] = mine;
    return all;
  }

 private:
  struct Round {
    int64_t mine = 0;
    std::vector<int64_t> received;
    std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  };
  const int rank_;
  std::vector<int> peers_;  // receives[i] is from peers_[i], in rank order
  Round rounds_[2];
  int next_ = 0;
};

}  // namespace

class GlooProcessGroup::Impl {
 public:
  Impl(Store& store, int rank, int size, GlooOptions options);
  ~Impl();

  template <typename T>
  void allReduceSum(T* data, int64_t n, const char* units);
  void broadcast(uint8_t* data, int64_t n, size_t elementSize, const char* units, int root);
  void allGather(const float* in, int64_t n, float* out);
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts);
  void barrier();

  const int rank;
  const int size;
  const GlooOptions options;

 private:
  // A Gloo algorithm object kept between calls. Building one takes slots
  // from the context in order, so every rank must build the same ones at the
  // same calls: that is what the two kinds of entry below guarantee.
  struct CachedAlgorithm {
    std::string shape;       // the call's kind, algorithm and counts
    void* memory = nullptr;  // what the algorithm reads and writes
    int64_t bytes = 0;
    int64_t id = -1;                             // in-place entries: the id every rank knows it by
    std::vector<double> staging;                 // owns `memory` for staged entries
    std::unique_ptr<gloo::Algorithm> algorithm;  // after staging: destroyed first
  };
  using BuildAlgorithm = std::function<std::unique_ptr<gloo::Algorithm>(void* memory)>;

  void join(Store& store, const std::string& who);
  template <typename T>
  void allReduceInPieces(T* data, int64_t n, const char* units);
  // Runs the algorithm for `shape` over `bytes` of `data`, building it with
  // `build` when no cached one fits. Returns the memory holding the result:
  // `data` itself, or the staging copy.
  void* runCached(const std::string& shape, void* data, int64_t bytes, const BuildAlgorithm& build);
  void* runStaged(const std::string& shape, void* data, int64_t bytes, const BuildAlgorithm& build);
  void* runInPlace(const std::string& shape, void* data, int64_t bytes, const BuildAlgorithm& build);
  // Collective: true when every rank passes the same id and it is not -1.
  bool everyRankHolds(int64_t id);
  // Collective: returns once every rank has built the algorithm just built.
  void awaitEveryRankBuilt();
  // Collective, once after connecting: see kFirstMessageBytes.
  void sizeSendBuffers();
  // Gloo's per-call barrier: it sends nothing through an algorithm object, so
  // it can run before sizeSendBuffers.
  void unboundBarrier();

  // Destroys what uses the connections, then the connections and the device.
  void closeConnections();
  // Runs `body` as the collective `operation`; any failure becomes CommError
  // and leaves the group unusable.
  template <typename Body>
  void collective(const std::string& operation, Body&& body);
  std::string explain(std::exception_ptr error, bool probePeers);
  std::vector<int> brokenPeers();

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  // Built once, after connecting (groups of 2 or more). Gloo's all-to-all
  // barrier waits on peers in rank order, so its timeout names a missing rank.
  std::unique_ptr<gloo::BarrierAllToAll> barrier_;
  std::unique_ptr<AllToAllExchange> exchange_;
  int waitingFor_ = -1;  // the rank exchange_ is (or was, when it failed) waiting for
  uint32_t nextTag_ = 1;
  std::string failure_;                 // the first failure; set = unusable
  std::list<CachedAlgorithm> staged_;   // most recently used first
  std::list<CachedAlgorithm> inPlace_;  // most recently used first
  int64_t inPlaceBytes_ = 0;
  int64_t nextInPlaceId_ = 0;
};

GlooProcessGroup::Impl::Impl(Store& store, int rank, int size, GlooOptions opts)
    : rank(rank), size(size), options(std::move(opts)) {
  const std::string who = "gloo group (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  if (size < 1) throw CommError("gloo group: size " + std::to_string(size) + " must be at least 1");
  if (rank < 0 || rank >= size)
    throw CommError(who + ": the rank must be between 0 and " + std::to_string(size - 1));
  if (options.timeout.count() <= 0)
    throw CommError(who + ": the timeout must be positive (it is " + durationText(options.timeout) + ")");
  if (!isKnownOption(options.algorithm))
    throw CommError(who + ": unknown all-reduce algorithm '" + options.algorithm +
                    "' (known: auto, ring, ring_chunked, halving_doubling, bcube)");
  if (options.address.empty())
    throw CommError(who + ": no local address to listen on (set this host's address)");

  if (std::string why = whyCannotListenOn(options.address); !why.empty())
    throw CommError(who + ": cannot listen on address '" + options.address + "' (" + why +
                    "); it must be an address of this host");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address;
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(who + ": cannot listen on address '" + options.address + "' (" +
                    withoutSourceLocation(e.what()) + "); it must be an address of this host");
  }
  join(store, who);
  context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context_->setTimeout(options.timeout);
  GlooStore glooStore(store, options.prefix, options.timeout);
  try {
    context_->connectFullMesh(glooStore, device_);
  } catch (...) {
    // The context may be half built: explain without touching its pairs.
    std::string why = explain(std::current_exception(), false);
    context_.reset();
    throw CommError(who + ": connecting to the other ranks: " + why);
  }
  if (size > 1) {
    try {
      barrier_ = std::make_unique<gloo::BarrierAllToAll>(context_);
      exchange_ = std::make_unique<AllToAllExchange>(*context_);
      sizeSendBuffers();
    } catch (...) {
      std::string why = explain(std::current_exception(), true);
      closeConnections();
      throw CommError(who + ": first exchange with the other ranks: " + why);
    }
  }
}

void GlooProcessGroup::Impl::sizeSendBuffers() {
  std::vector<char> outgoing(kFirstMessageBytes);
  std::vector<char> incoming(static_cast<size_t>(kFirstMessageBytes) * static_cast<size_t>(size));
  const int slot = context_->nextSlot();
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto& pair = context_->getPair(peer);
    sends.push_back(pair->createSendBuffer(slot, outgoing.data(), kFirstMessageBytes));
    receives.push_back(
        pair->createRecvBuffer(slot, incoming.data() + peer * kFirstMessageBytes, kFirstMessageBytes));
  }
  unboundBarrier();  // everyone's receive buffers, and barrier_'s, exist now
  for (auto& send : sends) send->send();
  for (auto& receive : receives) receive->waitRecv();
  for (auto& send : sends) send->waitSend();
}

GlooProcessGroup::Impl::~Impl() {
  if (context_ && failure_.empty() && size > 1 && std::uncaught_exceptions() == 0) {
    try {
      barrier();
    } catch (const std::exception&) {
      // A peer already gone or closing: there is nothing left to wait for.
    }
  }
  closeConnections();
}

void GlooProcessGroup::Impl::closeConnections() {
  // Algorithm objects hold buffers on the context's connections: they go first.
  staged_.clear();
  inPlace_.clear();
  exchange_.reset();
  barrier_.reset();
  context_.reset();
  device_.reset();
}

void GlooProcessGroup::Impl::join(Store& store, const std::string& who) {
  // Our own keys, before Gloo's: a rank that never comes is named here, and
  // a prefix left by an earlier group (whose addresses are stale) is refused.
  auto joinedKey = [&](int r) { return options.prefix + "/joined/" + std::to_string(r); };
  if (store.check(joinedKey(rank)))
    throw CommError(who + ": the store already holds a group under the prefix '" + options.prefix +
                    "' (give each group its own prefix, e.g. with the run's generation)");
  store.set(joinedKey(rank), Bytes{1});
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(joinedKey(r));
  try {
    store.wait(keys, options.timeout);
  } catch (const CommError&) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!store.check(joinedKey(r))) missing.push_back(r);
    if (missing.empty()) return;  // the last one came just after the deadline
    throw CommError(
        who + ": " + ranksText(missing) + " did not join within " + durationText(options.timeout) +
        " (is every rank started, with the same store, size and prefix '" + options.prefix + "'?)");
  }
}

template <typename Body>
void GlooProcessGroup::Impl::collective(const std::string& operation, Body&& body) {
  if (!failure_.empty())
    throw CommError(operation + ": the group failed earlier (" + failure_ + "); it cannot be used again");
  try {
    body();
    return;
  } catch (...) {
    failure_ = explain(std::current_exception(), true);
  }
  throw CommError(operation + ": " + failure_);
}

std::string GlooProcessGroup::Impl::explain(std::exception_ptr error, bool probePeers) {
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

  const std::string timeout = durationText(options.timeout);
  if (contains(message, "Connect timeout"))
    return "no connection within " + durationText(options.timeout * 5) +
           " (a rank stopped while connecting, or a firewall is in between?)";
  const bool timedOut = contains(message, "timeout") || contains(message, "Timed out");
  const bool closed = contains(message, "closed") || contains(message, "reset by peer") ||
                      contains(message, "Broken pipe") || contains(message, "Read error");
  // A failed wait on a known peer names it; otherwise look for the broken connections.
  std::vector<int> peers = waitingFor_ >= 0 ? std::vector<int>{waitingFor_}
                           : probePeers     ? brokenPeers()
                                            : std::vector<int>{};
  if (timedOut) {
    // A timed-out wait closes the one connection it waited on; a timed-out
    // per-call collective closes them all, and then no one rank is to blame.
    if (peers.size() == 1)
      return "timed out after " + timeout + " waiting for rank " + std::to_string(peers[0]);
    return "timed out after " + timeout + " (a rank did not take part in time)";
  }
  if (closed) {
    if (peers.empty()) return "a connection closed (peer process gone?)";
    return (peers.size() == 1 ? "connection to " : "connections to ") + ranksText(peers) +
           (peers.size() == 1 ? " closed (peer process gone?)" : " closed (peer processes gone?)");
  }
  return "network error: " + withoutSourceLocation(message);
}

std::vector<int> GlooProcessGroup::Impl::brokenPeers() {
  // Gloo's errors name a peer by its socket address, which does not say its
  // rank. A connection that failed rethrows its error on any further use, so
  // a zero-byte send notice on each finds the failed ones. The group is
  // unusable by now; a healthy peer just files the notice under a slot no one
  // reads.
  std::vector<int> broken;
  char nothing = 0;
  try {
    auto probe = context_->createUnboundBuffer(&nothing, 0);
    const uint64_t slot = gloo::Slot::build(kProbeSlotPrefix, 0);
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      try {
        context_->getPair(r)->send(probe.get(), slot, 0, 0);
      } catch (const std::exception&) {
        broken.push_back(r);
      }
    }
  } catch (const std::exception&) {
    // Could not even try: name no one.
  }
  return broken;
}

void* GlooProcessGroup::Impl::runCached(const std::string& shape, void* data, int64_t bytes,
                                        const BuildAlgorithm& build) {
  return bytes < kInPlaceFromBytes ? runStaged(shape, data, bytes, build)
                                   : runInPlace(shape, data, bytes, build);
}

void* GlooProcessGroup::Impl::runStaged(const std::string& shape, void* data, int64_t bytes,
                                        const BuildAlgorithm& build) {
  // Found by shape only, evicted by use order: both the same on every rank.
  auto it = std::find_if(staged_.begin(), staged_.end(),
                         [&](const CachedAlgorithm& c) { return c.shape == shape; });
  if (it != staged_.end()) {
    staged_.splice(staged_.begin(), staged_, it);
  } else {
    CachedAlgorithm entry;
    entry.shape = shape;
    entry.bytes = bytes;
    entry.staging.resize(static_cast<size_t>(bytes + sizeof(double) - 1) / sizeof(double));
    entry.memory = entry.staging.data();
    entry.algorithm = build(entry.memory);
    staged_.push_front(std::move(entry));
    if (staged_.size() > kMaxStagedEntries) staged_.pop_back();
    awaitEveryRankBuilt();
  }
  CachedAlgorithm& entry = staged_.front();
  std::memcpy(entry.memory, data, static_cast<size_t>(bytes));
  entry.algorithm->run();
  return entry.memory;
}

void* GlooProcessGroup::Impl::runInPlace(const std::string& shape, void* data, int64_t bytes,
                                         const BuildAlgorithm& build) {
  auto it = std::find_if(inPlace_.begin(), inPlace_.end(),
                         [&](const CachedAlgorithm& c) { return c.shape == shape && c.memory == data; });
  if (everyRankHolds(it == inPlace_.end() ? -1 : it->id)) {
    inPlace_.splice(inPlace_.begin(), inPlace_, it);
  } else {
    // Every rank builds now, so the slots the new algorithm takes match.
    if (it != inPlace_.end()) {
      inPlaceBytes_ -= it->bytes;
      inPlace_.erase(it);
    }
    CachedAlgorithm entry;
    entry.shape = shape;
    entry.memory = data;
    entry.bytes = bytes;
    entry.id = nextInPlaceId_++;
    entry.algorithm = build(data);
    inPlace_.push_front(std::move(entry));
    inPlaceBytes_ += bytes;
    awaitEveryRankBuilt();
    // Eviction may differ between ranks (addresses differ); that is safe,
    // since a use is always agreed first.
    while (inPlace_.size() > 1 &&
           (inPlace_.size() > kMaxInPlaceEntries || inPlaceBytes_ > kMaxInPlaceBytes)) {
      inPlaceBytes_ -= inPlace_.back().bytes;
      inPlace_.pop_back();
    }
  }
  inPlace_.front().algorithm->run();
  return data;
}

void GlooProcessGroup::Impl::awaitEveryRankBuilt() {
  // Data that reaches a rank before it has built the algorithm it is for
  // (it is still in an earlier call) makes Gloo's event thread spin until
  // the buffer appears, which on a busy machine starves the very rank it is
  // waiting for. A barrier after every build is cheap next to that: builds
  // are rare once a training loop has run its first step.
  barrier_->run();
}

void GlooProcessGroup::Impl::unboundBarrier() {
  gloo::BarrierOptions opts(context_);
  opts.setTag(nextTag_++);
  opts.setTimeout(options.timeout);
  gloo::barrier(opts);
}

bool GlooProcessGroup::Impl::everyRankHolds(int64_t id) {
  const std::vector<int64_t> ids = exchange_->run(id, &waitingFor_);
  return id >= 0 && std::all_of(ids.begin(), ids.end(), [&](int64_t other) { return other == id; });
}

template <typename T>
void GlooProcessGroup::Impl::allReduceSum(T* data, int64_t n, const char* units) {
  checkCount("all-reduce", n);
  if (n == 0 || size == 1) return;
  collective("all-reduce of " + countText(n, units), [&] { allReduceInPieces(data, n, units); });
}

template <typename T>
void GlooProcessGroup::Impl::allReduceInPieces(T* data, int64_t n, const char* units) {
  const int64_t piece = kMaxBytesPerRun / static_cast<int64_t>(sizeof(T));
  for (int64_t offset = 0; offset < n; offset += piece) {
    const int count = static_cast<int>(std::min(piece, n - offset));
    const int64_t bytes = int64_t(count) * int64_t(sizeof(T));
    const AllReduceAlgorithm algorithm = resolveAlgorithm(options.algorithm, size, bytes);
    const std::string shape =
        std::string("all-reduce ") + units + " " + nameOf(algorithm) + " " + std::to_string(count);
    T* part = data + offset;
    void* result = runCached(shape, part, bytes, [&](void* memory) {
      return makeAllReduce<T>(context_, algorithm, static_cast<T*>(memory), count);
    });
    if (result != part) std::memcpy(part, result, static_cast<size_t>(bytes));
  }
}

void GlooProcessGroup::Impl::broadcast(uint8_t* data, int64_t n, size_t elementSize, const char* units,
                                       int root) {
  checkCount("broadcast", n);
  if (root < 0 || root >= size)
    throw CommError("broadcast: root rank " + std::to_string(root) + " is outside the group of " +
                    std::to_string(size) + " ranks");
  if (n == 0 || size == 1) return;
  collective("broadcast of " + countText(n, units) + " from rank " + std::to_string(root), [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, static_cast<size_t>(n) * elementSize);
    opts.setRoot(root);
    opts.setTag(nextTag_++);
    opts.setTimeout(options.timeout);
    gloo::broadcast(opts);
  });
}

void GlooProcessGroup::Impl::allGather(const float* in, int64_t n, float* out) {
  checkCount("all-gather", n);
  // Gloo's all-gather divides by the count: nothing to do is done here.
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (size == 1) {
    std::memmove(out, in, bytes);
    return;
  }
  collective("all-gather of " + countText(n, "floats"), [&] {
    // Gloo copies the input into the output; an input inside the output
    // (an in-place gather) goes through a copy of its own.
    std::vector<float> copy;
    const float* input = in;
    if (overlaps(in, bytes, out, bytes * static_cast<size_t>(size))) {
      copy.assign(in, in + n);
      input = copy.data();
    }
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(input), static_cast<size_t>(n));
    opts.setOutput(out, static_cast<size_t>(n) * static_cast<size_t>(size));
    opts.setTag(nextTag_++);
    opts.setTimeout(options.timeout);
    gloo::allgather(opts);
  });
}

void GlooProcessGroup::Impl::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  if (counts.size() != static_cast<size_t>(size))
    throw CommError("reduce-scatter: " + std::to_string(counts.size()) + " counts given for a group of " +
                    std::to_string(size) + " ranks (one count per rank)");
  int64_t total = 0, offset = 0;
  for (int r = 0; r < size; ++r) {
    checkCount("reduce-scatter", counts[r]);
    if (r == rank) offset = total;
    total += counts[r];
  }
  if (total == 0 || size == 1) return;
  const bool even = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; });
  collective("reduce-scatter of " + countText(total, "floats"), [&] {
    if (!even || total * int64_t(sizeof(float)) > kMaxBytesPerRun) {
      // Gloo's halving-doubling reduce-scatter takes a split per rank, but
      // with uneven splits it hangs or sums wrong on some group sizes (e.g.
      // 1001 floats as 0/250/500/0/251 over 5 ranks). An all-reduce of the
      // whole buffer leaves every segment summed, at twice the traffic.
      allReduceInPieces(data, total, "floats");
      return;
    }
    const std::string shape =
        "reduce-scatter floats " + std::to_string(size) + " x " + std::to_string(counts[0]);
    const std::vector<int> split(static_cast<size_t>(size), static_cast<int>(counts[0]));
    void* result = runCached(shape, data, total * int64_t(sizeof(float)), [&](void* memory) {
      return std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          context_, std::vector<float*>{static_cast<float*>(memory)}, static_cast<int>(total), split);
    });
    // Gloo leaves a rank's sums at the start of the buffer; the interface
    // wants them at the rank's own offset.
    std::memmove(data + offset, result, static_cast<size_t>(counts[rank]) * sizeof(float));
  });
}

void GlooProcessGroup::Impl::barrier() {
  if (size == 1) return;
  collective("barrier", [&] { barrier_->run(); });
}

// GlooProcessGroup ----------------------------------------------------------

GlooProcessGroup::GlooProcessGroup(Store& store, int rank, int size, GlooOptions options)
    : impl_(std::make_unique<Impl>(store, rank, size, std::move(options))) {}

GlooProcessGroup::~GlooProcessGroup() = default;

int GlooProcessGroup::rank() const { return impl_->rank; }
int GlooProcessGroup::size() const { return impl_->size; }
std::string GlooProcessGroup::describe() const { return "gloo (" + impl_->options.algorithm + ")"; }

void GlooProcessGroup::allReduceSum(float* data, int64_t n) { impl_->allReduceSum(data, n, "floats"); }
void GlooProcessGroup::allReduceSum(double* data, int64_t n) { impl_->allReduceSum(data, n, "doubles"); }

void GlooProcessGroup::broadcast(float* data, int64_t n, int root) {
  impl_->broadcast(reinterpret_cast<uint8_t*>(data), n, sizeof(float), "floats", root);
}

void GlooProcessGroup::broadcastBytes(uint8_t* data, int64_t n, int root) {
  impl_->broadcast(data, n, 1, "bytes", root);
}

void GlooProcessGroup::allGather(const float* in, int64_t n, float* out) { impl_->allGather(in, n, out); }

void GlooProcessGroup::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  impl_->reduceScatterSum(data, counts);
}

void GlooProcessGroup::barrier() { impl_->barrier(); }

std::string GlooProcessGroup::allReduceAlgorithmFor(const std::string& option, int size, int64_t bytes) {
  if (!isKnownOption(option))
    throw CommError("unknown all-reduce algorithm '" + option +
                    "' (known: auto, ring, ring_chunked, halving_doubling, bcube)");
  return nameOf(resolveAlgorithm(option, size, bytes));
}

}  // namespace dtrain
