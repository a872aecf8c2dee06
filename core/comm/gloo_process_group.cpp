#include "core/comm/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "core/comm/collective_checks.h"
#include "core/comm/gloo_algorithm_cache.h"
#include "core/comm/gloo_algorithm_choice.h"
#include "core/comm/gloo_all_to_all_exchange.h"
#include "core/comm/gloo_connection_setup.h"
#include "core/comm/gloo_failure_diagnosis.h"
#include "core/comm/gloo_store.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// Gloo's algorithm objects count elements and bytes in int; one run covers at
// most this many bytes and longer buffers go in pieces.
constexpr int64_t kMaxBytesPerRun = int64_t(1) << 30;

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
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag);
  void recv(void* data, int64_t bytes, int from, uint32_t tag);
  void waitSends();

  const int rank;
  const int size;
  const GlooOptions options;

 private:
  template <typename T>
  void allReduceInPieces(T* data, int64_t n, const char* units);

  // Destroys what uses the connections, then the connections and the device.
  void closeConnections();
  // Runs `body` as the collective `operation`; any failure becomes CommError
  // and leaves the group unusable.
  template <typename Body>
  void collective(const std::string& operation, Body&& body);
  // The failure in words; `probePeers` allows looking for broken connections
  // (not while the context may be half built).
  std::string explain(std::exception_ptr error, bool probePeers);

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  // Built once, after connecting (groups of 2 or more). Gloo's all-to-all
  // barrier waits on peers in rank order, so its timeout names a missing rank.
  std::unique_ptr<gloo::BarrierAllToAll> barrier_;
  std::unique_ptr<AllToAllExchange> exchange_;
  std::unique_ptr<GlooAlgorithmCache> cache_;
  uint32_t nextTag_ = 1;
  // Point-to-point sends started and not yet waited for, with their peers.
  std::vector<std::pair<std::unique_ptr<gloo::transport::UnboundBuffer>, int>> sends_;
  std::string failure_;  // the first failure; set = unusable

 public:
  std::atomic<bool> abandoned_{false};  // set from any thread (abandon())
};

GlooProcessGroup::Impl::Impl(Store& store, int rank, int size, GlooOptions opts)
    : rank(rank), size(size), options(std::move(opts)) {
  const std::string who = "gloo group (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  if (size < 1) throw CommError("gloo group: size " + std::to_string(size) + " must be at least 1");
  if (rank < 0 || rank >= size)
    throw CommError(who + ": the rank must be between 0 and " + std::to_string(size - 1));
  if (options.timeout.count() <= 0)
    throw CommError(who + ": the timeout must be positive (it is " + durationText(options.timeout) + ")");
  if (!isKnownAllReduceOption(options.algorithm))
    throw CommError(who + ": " + unknownAllReduceOptionText(options.algorithm));
  if (options.address.empty())
    throw CommError(who + ": no local address to listen on (set this host's address)");

  device_ = listenOn(options.address, who);
  awaitEveryRankJoined(store, rank, size, options.prefix, options.timeout, who, options.rank_hosts);
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
      cache_ = std::make_unique<GlooAlgorithmCache>(*exchange_, *barrier_);
      primeSendBuffers(context_, options.timeout, nextTag_++);
    } catch (...) {
      std::string why = explain(std::current_exception(), true);
      closeConnections();
      throw CommError(who + ": first exchange with the other ranks: " + why);
    }
  }
}

GlooProcessGroup::Impl::~Impl() {
  if (context_ && failure_.empty() && !abandoned_ && size > 1 && std::uncaught_exceptions() == 0) {
    try {
      barrier();
    } catch (const std::exception&) {
      // A peer already gone or closing: there is nothing left to wait for.
    }
  }
  closeConnections();
}

void GlooProcessGroup::Impl::closeConnections() {
  // Shut every connection first: after a failure, peers may still be sending
  // into this rank's receive buffers, and Gloo's event loop would go on
  // writing into them while they are freed below.
  if (context_) context_->closeConnections();
  // Algorithm objects hold buffers on the context's connections: they go next.
  cache_.reset();
  exchange_.reset();
  barrier_.reset();
  context_.reset();
  device_.reset();
}

template <typename Body>
void GlooProcessGroup::Impl::collective(const std::string& operation, Body&& body) {
  if (!failure_.empty())
    throw CommError(operation + ": the group failed earlier (" + failure_ + "); it cannot be used again");
  if (abandoned_) {
    // Closing now fails the peers' waits on this rank at once.
    failure_ = "the run is re-forming its group";
    closeConnections();
    throw CommError(operation + ": " + failure_);
  }
  try {
    body();
    return;
  } catch (...) {
    failure_ = explain(std::current_exception(), true);
  }
  throw CommError(operation + ": " + failure_);
}

std::string GlooProcessGroup::Impl::explain(std::exception_ptr error, bool probePeers) {
  return explainGlooFailure(
      error, options.timeout,
      [&]() -> std::vector<int> {
        // A failed wait on a known peer names it; otherwise look for the broken connections.
        if (exchange_ && exchange_->waitingFor() >= 0) return {exchange_->waitingFor()};
        if (probePeers) return findBrokenPeers(*context_);
        return {};
      },
      options.rank_hosts);
}

template <typename T>
void GlooProcessGroup::Impl::allReduceSum(T* data, int64_t n, const char* units) {
  checkElementCount("all-reduce", n);
  if (n == 0 || size == 1) return;
  collective("all-reduce of " + elementCountText(n, units), [&] { allReduceInPieces(data, n, units); });
}

template <typename T>
void GlooProcessGroup::Impl::allReduceInPieces(T* data, int64_t n, const char* units) {
  const int64_t piece = kMaxBytesPerRun / static_cast<int64_t>(sizeof(T));
  for (int64_t offset = 0; offset < n; offset += piece) {
    const int count = static_cast<int>(std::min(piece, n - offset));
    const int64_t bytes = int64_t(count) * int64_t(sizeof(T));
    const AllReduceAlgorithm algorithm = chooseAllReduceAlgorithm(options.algorithm, size, bytes);
    const std::string shape = std::string("all-reduce ") + units + " " + allReduceAlgorithmName(algorithm) +
                              " " + std::to_string(count);
    T* part = data + offset;
    void* result = cache_->run(shape, part, bytes, [&](void* memory) {
      return makeAllReduce(context_, algorithm, static_cast<T*>(memory), count);
    });
    if (result != part) std::memcpy(part, result, static_cast<size_t>(bytes));
  }
}

void GlooProcessGroup::Impl::broadcast(uint8_t* data, int64_t n, size_t elementSize, const char* units,
                                       int root) {
  checkElementCount("broadcast", n);
  checkRootRank("broadcast", root, size);
  if (n == 0 || size == 1) return;
  collective("broadcast of " + elementCountText(n, units) + " from rank " + std::to_string(root), [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, static_cast<size_t>(n) * elementSize);
    opts.setRoot(root);
    opts.setTag(nextTag_++);
    opts.setTimeout(options.timeout);
    gloo::broadcast(opts);
  });
}

void GlooProcessGroup::Impl::allGather(const float* in, int64_t n, float* out) {
  checkElementCount("all-gather", n);
  // Gloo's all-gather divides by the count: nothing to do is done here.
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (size == 1) {
    std::memmove(out, in, bytes);
    return;
  }
  collective("all-gather of " + elementCountText(n, "floats"), [&] {
    // Gloo copies the input into the output; an input inside the output
    // (an in-place gather) goes through a copy of its own.
    std::vector<float> copy;
    const float* input = in;
    if (buffersOverlap(in, bytes, out, bytes * static_cast<size_t>(size))) {
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
  const int64_t total = reduceScatterTotal(counts, size);
  if (total == 0 || size == 1) return;
  collective("reduce-scatter of " + elementCountText(total, "floats"), [&] {
    // An all-reduce of the whole buffer leaves every segment summed, at twice
    // the traffic of a true reduce-scatter. Gloo's halving-doubling
    // reduce-scatter hangs or sums wrong with uneven splits on some group
    // sizes (1001 floats as 0/250/500/0/251 over 5 ranks), and even with even
    // splits a rank may overwrite the front of its buffer while a peer still
    // reads it (2 ranks, 1048578 floats: wrong sums in about 1 run of 10).
    // Nothing on the training path reduce-scatters yet; correctness first.
    allReduceInPieces(data, total, "floats");
  });
}

void GlooProcessGroup::Impl::barrier() {
  if (size == 1) return;
  collective("barrier", [&] { barrier_->run(); });
}

namespace {

// Point-to-point messages' slots: apart from every collective's (gloo/types.h).
constexpr uint8_t kPointToPointSlotPrefix = 0x70;

void checkPeer(const char* what, int peer, int self, int size) {
  if (peer < 0 || peer >= size || peer == self)
    throw CommError(std::string(what) + ": rank " + std::to_string(peer) + " is not another rank of the " +
                    std::to_string(size) + " (this is rank " + std::to_string(self) + ")");
}

}  // namespace

void GlooProcessGroup::Impl::sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) {
  checkPeer("send", to, rank, size);
  collective("send of " + std::to_string(bytes) + " bytes to rank " + std::to_string(to), [&] {
    auto buffer = context_->createUnboundBuffer(const_cast<void*>(data), static_cast<size_t>(bytes));
    buffer->send(to, gloo::Slot::build(kPointToPointSlotPrefix, tag));
    sends_.emplace_back(std::move(buffer), to);
  });
}

void GlooProcessGroup::Impl::recv(void* data, int64_t bytes, int from, uint32_t tag) {
  checkPeer("receive", from, rank, size);
  collective("receive of " + std::to_string(bytes) + " bytes from " + ranksText({from}, options.rank_hosts),
             [&] {
               auto buffer = context_->createUnboundBuffer(data, static_cast<size_t>(bytes));
               buffer->recv(from, gloo::Slot::build(kPointToPointSlotPrefix, tag));
               if (!buffer->waitRecv(options.timeout))
                 throw CommError(ranksText({from}, options.rank_hosts) + " sent nothing within " +
                                 std::to_string(options.timeout.count()) + " ms");
             });
}

void GlooProcessGroup::Impl::waitSends() {
  while (!sends_.empty()) {
    auto& [buffer, to] = sends_.front();
    collective("send to " + ranksText({to}, options.rank_hosts), [&] {
      if (!buffer->waitSend(options.timeout))
        throw CommError(ranksText({to}, options.rank_hosts) + " took nothing within " +
                        std::to_string(options.timeout.count()) + " ms");
    });
    sends_.erase(sends_.begin());
  }
}

// GlooProcessGroup ----------------------------------------------------------

GlooProcessGroup::GlooProcessGroup(Store& store, int rank, int size, GlooOptions options)
    : impl_(std::make_unique<Impl>(store, rank, size, std::move(options))) {}

GlooProcessGroup::~GlooProcessGroup() = default;

int GlooProcessGroup::rank() const { return impl_->rank; }
int GlooProcessGroup::size() const { return impl_->size; }
void GlooProcessGroup::abandon() { impl_->abandoned_ = true; }

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

void GlooProcessGroup::sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) {
  impl_->sendAsync(data, bytes, to, tag);
}

void GlooProcessGroup::recv(void* data, int64_t bytes, int from, uint32_t tag) {
  impl_->recv(data, bytes, from, tag);
}

void GlooProcessGroup::waitSends() { impl_->waitSends(); }

std::string GlooProcessGroup::allReduceAlgorithmFor(const std::string& option, int size, int64_t bytes) {
  if (!isKnownAllReduceOption(option)) throw CommError(unknownAllReduceOptionText(option));
  return allReduceAlgorithmName(chooseAllReduceAlgorithm(option, size, bytes));
}

}  // namespace dtrain
