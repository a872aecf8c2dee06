#include "core/comm/cuda/nccl_process_group.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <numeric>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/nccl_communicator.h"
#include "core/backend/cuda/pointer_kind.h"
#include "core/backend/cuda/poll_with_backoff.h"
#include "core/backend/cuda/staging_buffers.h"
#include "core/backend/device_query.h"
#include "core/comm/collective_checks.h"
#include "core/errors.h"
#include "core/util/seconds.h"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

std::string whoText(int rank, int size, int device) {
  return "nccl group (rank " + std::to_string(rank) + " of " + std::to_string(size) + ", device " +
         std::to_string(device) + ")";
}

// Checks the constructor's arguments and makes `device` current on the
// calling thread (the stream and events made next belong to the current
// device); returns it.
int checkedDevice(int rank, int size, int device, std::chrono::milliseconds timeout) {
  const std::string who = whoText(rank, size, device);
  if (size < 1) throw CommError("nccl group: size " + std::to_string(size) + " must be at least 1");
  if (rank < 0 || rank >= size)
    throw CommError(who + ": the rank must be between 0 and " + std::to_string(size - 1));
  if (timeout.count() <= 0)
    throw CommError(who + ": the timeout must be positive (it is " + durationText(timeout) + ")");
  const int visible = visibleCudaDevices();
  if (device < 0 || device >= visible)
    throw DeviceError(who + ": there is no CUDA device " + std::to_string(device) + " (" +
                      (visible == 0 ? std::string("none is visible")
                                    : "devices 0 to " + std::to_string(visible - 1) + " are visible") +
                      ")");
  checkCuda(cudaSetDevice(device), "select the group's device");
  return device;
}

// Rank 0 makes the id every rank joins the communicator with and publishes
// it under `key`; the others wait for it there.
ncclUniqueId exchangeUniqueId(Store& store, const std::string& key, int rank,
                              std::chrono::milliseconds timeout, const std::string& who) {
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    if (made != ncclSuccess)
      throw CommError(who + ": NCCL could not create the group's id: " + ncclErrorText(made));
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store.set(key, Bytes(bytes, bytes + sizeof id));
    return id;
  }
  Bytes value;
  try {
    value = store.get(key, timeout);
  } catch (const CommError& e) {
    throw CommError(who + ": waiting for rank 0's NCCL id: " + e.what());
  }
  if (value.size() != sizeof id)
    throw CommError(who + ": the value under \"" + key + "\" has " + std::to_string(value.size()) +
                    " bytes, not those of an NCCL id (" + std::to_string(sizeof id) +
                    "); give this group a key prefix of its own");
  std::memcpy(&id, value.data(), sizeof id);
  return id;
}

}  // namespace

class NcclProcessGroup::Impl {
 public:
  Impl(Store& store, const std::string& keyPrefix, int rank, int size, int device, cudaStream_t computeStream,
       std::chrono::milliseconds timeout);
  ~Impl();

  template <typename T>
  void allReduceSum(T* data, int64_t n, ncclDataType_t type, const char* units);
  void broadcast(void* data, int64_t n, size_t elementSize, ncclDataType_t type, const char* units, int root);
  void allGather(const float* in, int64_t n, float* out);
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts);
  void barrier();
  void sendAsync(const void* data, int64_t bytes, int to);
  void recv(void* data, int64_t bytes, int from);
  void waitSends();

  const int rank;
  const int size;
  const int device;
  const cudaStream_t computeStream;
  const std::chrono::milliseconds timeout;

 private:
  struct Call {
    std::string operation;  // "NCCL all-reduce of 1001 floats"
    Clock::time_point deadline;
  };

  // Runs `body(call)` as the collective `operation`; any failure aborts the
  // communicator, leaves the group unusable and becomes CommError.
  template <typename Body>
  void collective(const std::string& operation, Body&& body);
  // Makes the group's device current on the calling thread.
  void useDevice() const;
  // Where `data` lives; device memory of another device is refused.
  PointerKind checkedKind(const void* data, const std::string& operation) const;
  // The group's stream waits for the work queued on the compute stream so far.
  void waitForCompute();
  // Queues a copy on the group's stream (host or device, either way).
  void copyOnStream(void* to, const void* from, size_t bytes);
  // Copies a result on the device back to host memory and waits for it.
  void copyToHost(void* to, const void* from, size_t bytes, const Call& call);
  // A non-blocking NCCL call may answer "in progress" while it is still
  // being queued: waits until it is (nothing else may be called meanwhile).
  void awaitStarted(ncclResult_t begun, const Call& call);
  // Waits until everything queued on the group's stream has run, watching
  // NCCL's asynchronous error and the deadline.
  void awaitStream(const Call& call);
  std::string failedText(const Call& call, ncclResult_t result) const;
  std::string timedOutText(const Call& call) const;
  std::string onRank() const { return " on rank " + std::to_string(rank); }
  // `peer` of a send or receive: another rank of the group.
  void checkPeer(const std::string& operation, int peer) const;
  void throwIfAbandoned(const Call& call) const {
    if (abandoned_)
      throw CommError(call.operation + onRank() + ": left the call: the run is re-forming its group");
  }

  CudaStream stream_;
  CudaEvent computeReady_;
  CudaEvent done_;
  DeviceStagingBuffer staging_;
  // A queued send's copy of host memory: pinned (so the copy to the device
  // waits for nothing queued before it), then on the device; in use until
  // waitSends(), then reused by later sends (a pipeline stage sends the same
  // messages every step; allocating pinned and device memory per send would
  // cost more than the send).
  struct SendCopy {
    PinnedHostBuffer host;
    DeviceStagingBuffer device;
  };
  std::vector<std::unique_ptr<SendCopy>> send_copies_;
  size_t send_copies_used_ = 0;
  bool sends_queued_ = false;
  // Last: closed before the stream and buffers its calls used go.
  std::unique_ptr<NcclCommunicator> comm_;
  std::string failure_;  // the first failure; set = unusable

 public:
  std::atomic<bool> abandoned_{false};  // set from any thread (abandon())
};

NcclProcessGroup::Impl::Impl(Store& store, const std::string& keyPrefix, int rank, int size, int device,
                             cudaStream_t computeStream, std::chrono::milliseconds timeout)
    : rank(rank),
      size(size),
      device(checkedDevice(rank, size, device, timeout)),
      computeStream(computeStream),
      timeout(timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string who = whoText(rank, size, device);
  const ncclUniqueId id = exchangeUniqueId(store, keyPrefix + "/nccl_unique_id", rank, timeout, who);
  comm_ = std::make_unique<NcclCommunicator>(id, rank, size, deadline, timeout, who);
}

NcclProcessGroup::Impl::~Impl() {
  // Closing runs on the group's device, whichever thread destroys the group.
  cudaSetDevice(device);
  // After a failure, or while an exception unwinds (this rank stops taking
  // part), an orderly close would only keep the peers waiting.
  if (!failure_.empty() || abandoned_ || std::uncaught_exceptions() > 0) comm_->abort();
}

template <typename Body>
void NcclProcessGroup::Impl::collective(const std::string& operation, Body&& body) {
  if (!failure_.empty())
    throw CommError(operation + onRank() + ": the group failed earlier (" + failure_ +
                    "); it cannot be used again");
  const Call call{operation, Clock::now() + timeout};
  try {
    throwIfAbandoned(call);
    body(call);
    return;
  } catch (const CommError& e) {
    failure_ = e.what();
  } catch (const std::exception& e) {
    failure_ = operation + " failed" + onRank() + ": " + e.what();
  }
  comm_->abort();
  throw CommError(failure_);
}

void NcclProcessGroup::Impl::useDevice() const {
  checkCuda(cudaSetDevice(device), "select the group's device");
}

PointerKind NcclProcessGroup::Impl::checkedKind(const void* data, const std::string& operation) const {
  const PointerKind kind = pointerKind(data);
  if (kind.on_device && kind.device >= 0 && kind.device != device)
    throw CommError(operation + onRank() + ": the buffer is memory of CUDA device " +
                    std::to_string(kind.device) + ", and this group's device is " + std::to_string(device) +
                    "; pass memory of device " + std::to_string(device) + " or host memory");
  return kind;
}

void NcclProcessGroup::Impl::waitForCompute() {
  checkCuda(cudaEventRecord(computeReady_.get(), computeStream),
            "mark the work queued on the compute stream");
  computeReady_.makeWait(stream_);
}

void NcclProcessGroup::Impl::copyOnStream(void* to, const void* from, size_t bytes) {
  checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream_.get()), "copy a staged buffer");
}

void NcclProcessGroup::Impl::copyToHost(void* to, const void* from, size_t bytes, const Call& call) {
  // Only after the collective has finished (awaitStream): a copy into
  // pageable memory blocks the host until it is done, which must not mean
  // waiting on peers without a deadline.
  copyOnStream(to, from, bytes);
  awaitStream(call);
}

void NcclProcessGroup::Impl::awaitStarted(ncclResult_t begun, const Call& call) {
  if (begun == ncclSuccess) return;
  if (begun != ncclInProgress) throw CommError(failedText(call, begun));
  ncclResult_t now = begun;
  const bool settled = pollWithBackoff(
      [&] {
        throwIfAbandoned(call);
        now = comm_->state();
        return now != ncclInProgress;
      },
      call.deadline);
  if (!settled) throw CommError(timedOutText(call));
  if (now != ncclSuccess) throw CommError(failedText(call, now));
}

void NcclProcessGroup::Impl::awaitStream(const Call& call) {
  checkCuda(cudaEventRecord(done_.get(), stream_.get()), "mark the end of the call");
  const bool finished = pollWithBackoff(
      [&] {
        const cudaError_t queried = cudaEventQuery(done_.get());
        if (queried == cudaSuccess) return true;
        if (queried != cudaErrorNotReady) checkCuda(queried, "wait for the call on the device");
        cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
        throwIfAbandoned(call);
        const ncclResult_t state = comm_->state();
        if (state != ncclSuccess && state != ncclInProgress) throw CommError(failedText(call, state));
        return false;
      },
      call.deadline);
  if (!finished) throw CommError(timedOutText(call));
}

std::string NcclProcessGroup::Impl::failedText(const Call& call, ncclResult_t result) const {
  std::string text = call.operation + " failed" + onRank() + ": " + ncclErrorText(result);
  // Wrong arguments or usage are this rank's own doing; the rest comes from outside.
  if (result != ncclInvalidArgument && result != ncclInvalidUsage)
    text += "; a peer died or the network failed";
  return text;
}

std::string NcclProcessGroup::Impl::timedOutText(const Call& call) const {
  return call.operation + onRank() + " did not complete within " + durationText(timeout) +
         "; a peer stopped taking part";
}

template <typename T>
void NcclProcessGroup::Impl::allReduceSum(T* data, int64_t n, ncclDataType_t type, const char* units) {
  checkElementCount("all-reduce", n);
  if (n == 0) return;
  const std::string operation = "NCCL all-reduce of " + elementCountText(n, units);
  useDevice();
  const bool staged = !checkedKind(data, operation).on_device;
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  collective(operation, [&](const Call& call) {
    void* buffer = staged ? staging_.reserve(bytes) : data;
    waitForCompute();
    if (staged) copyOnStream(buffer, data, bytes);
    awaitStarted(
        ncclAllReduce(buffer, buffer, static_cast<size_t>(n), type, ncclSum, comm_->get(), stream_.get()),
        call);
    awaitStream(call);
    if (staged) copyToHost(data, buffer, bytes, call);
  });
}

void NcclProcessGroup::Impl::broadcast(void* data, int64_t n, size_t elementSize, ncclDataType_t type,
                                       const char* units, int root) {
  checkElementCount("broadcast", n);
  checkRootRank("broadcast", root, size);
  if (n == 0) return;
  const std::string operation =
      "NCCL broadcast of " + elementCountText(n, units) + " from rank " + std::to_string(root);
  useDevice();
  const bool staged = !checkedKind(data, operation).on_device;
  const size_t bytes = static_cast<size_t>(n) * elementSize;
  collective(operation, [&](const Call& call) {
    void* buffer = staged ? staging_.reserve(bytes) : data;
    waitForCompute();
    if (staged && rank == root) copyOnStream(buffer, data, bytes);
    awaitStarted(
        ncclBroadcast(buffer, buffer, static_cast<size_t>(n), type, root, comm_->get(), stream_.get()), call);
    awaitStream(call);
    if (staged && rank != root) copyToHost(data, buffer, bytes, call);
  });
}

void NcclProcessGroup::Impl::allGather(const float* in, int64_t n, float* out) {
  checkElementCount("all-gather", n);
  if (n == 0) return;
  const std::string operation = "NCCL all-gather of " + elementCountText(n, "floats");
  useDevice();
  const bool inOnDevice = checkedKind(in, operation).on_device;
  const bool outOnDevice = checkedKind(out, operation).on_device;
  const size_t inBytes = static_cast<size_t>(n) * sizeof(float);
  const size_t outBytes = inBytes * static_cast<size_t>(size);
  // NCCL gathers in place only when the input sits at this rank's place in
  // the output; an input elsewhere inside the output goes through a copy of
  // its own, as does host memory.
  const bool inPlace = inOnDevice && outOnDevice && in == out + static_cast<int64_t>(rank) * n;
  const bool stageIn = !inOnDevice || (!inPlace && buffersOverlap(in, inBytes, out, outBytes));
  const bool stageOut = !outOnDevice;
  collective(operation, [&](const Call& call) {
    // The staging buffer holds the output first, then the input.
    char* scratch = nullptr;
    if (stageIn || stageOut)
      scratch = static_cast<char*>(staging_.reserve((stageOut ? outBytes : 0) + (stageIn ? inBytes : 0)));
    float* output = stageOut ? reinterpret_cast<float*>(scratch) : out;
    const float* input = stageIn ? reinterpret_cast<const float*>(scratch + (stageOut ? outBytes : 0)) : in;
    waitForCompute();
    if (stageIn) copyOnStream(const_cast<float*>(input), in, inBytes);
    awaitStarted(ncclAllGather(input, output, static_cast<size_t>(n), ncclFloat, comm_->get(), stream_.get()),
                 call);
    awaitStream(call);
    if (stageOut) copyToHost(out, output, outBytes, call);
  });
}

void NcclProcessGroup::Impl::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  const int64_t total = reduceScatterTotal(counts, size);
  if (total == 0) return;
  const std::string operation = "NCCL reduce-scatter of " + elementCountText(total, "floats");
  useDevice();
  const bool staged = !checkedKind(data, operation).on_device;
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank, int64_t(0));
  const int64_t mine = counts[static_cast<size_t>(rank)];
  const bool even = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts.front(); });
  const size_t bytes = static_cast<size_t>(total) * sizeof(float);
  collective(operation, [&](const Call& call) {
    float* buffer = staged ? static_cast<float*>(staging_.reserve(bytes)) : data;
    waitForCompute();
    if (staged) copyOnStream(buffer, data, bytes);
    // With equal counts this rank's segment is where NCCL's in-place
    // reduce-scatter puts its result; uneven splits sum the whole buffer.
    const ncclResult_t begun = even ? ncclReduceScatter(buffer, buffer + offset, static_cast<size_t>(mine),
                                                        ncclFloat, ncclSum, comm_->get(), stream_.get())
                                    : ncclAllReduce(buffer, buffer, static_cast<size_t>(total), ncclFloat,
                                                    ncclSum, comm_->get(), stream_.get());
    awaitStarted(begun, call);
    awaitStream(call);
    if (staged && mine > 0)
      copyToHost(data + offset, buffer + offset, static_cast<size_t>(mine) * sizeof(float), call);
  });
}

void NcclProcessGroup::Impl::barrier() {
  useDevice();
  collective("NCCL barrier", [&](const Call& call) {
    auto* value = static_cast<float*>(staging_.reserve(sizeof(float)));
    waitForCompute();
    checkCuda(cudaMemsetAsync(value, 0, sizeof(float), stream_.get()), "clear the barrier's value");
    awaitStarted(ncclAllReduce(value, value, 1, ncclFloat, ncclSum, comm_->get(), stream_.get()), call);
    awaitStream(call);
  });
}

void NcclProcessGroup::Impl::checkPeer(const std::string& operation, int peer) const {
  if (size == 1) throw CommError(operation + onRank() + ": a group of 1 rank has no peer");
  if (peer < 0 || peer >= size || peer == rank)
    throw CommError(operation + onRank() + ": the peer must be another rank between 0 and " +
                    std::to_string(size - 1) + " (got " + std::to_string(peer) + ")");
}

void NcclProcessGroup::Impl::sendAsync(const void* data, int64_t bytes, int to) {
  const std::string operation =
      "NCCL send of " + elementCountText(bytes, "bytes") + " to rank " + std::to_string(to);
  checkPeer(operation, to);
  if (bytes <= 0) return;
  useDevice();
  const bool staged = !checkedKind(data, operation).on_device;
  collective(operation, [&](const Call& call) {
    const void* buffer = data;
    if (staged) {  // the caller's host memory may change once this returns: a copy of its own
      if (send_copies_used_ == send_copies_.size()) send_copies_.push_back(std::make_unique<SendCopy>());
      SendCopy& copy = *send_copies_[send_copies_used_++];
      void* pinned = copy.host.reserve(static_cast<size_t>(bytes));
      std::memcpy(pinned, data, static_cast<size_t>(bytes));
      void* on_device = copy.device.reserve(static_cast<size_t>(bytes));
      copyOnStream(on_device, pinned, static_cast<size_t>(bytes));
      buffer = on_device;
    }
    waitForCompute();  // device memory the compute stream is still writing
    awaitStarted(ncclSend(buffer, static_cast<size_t>(bytes), ncclUint8, to, comm_->get(), stream_.get()),
                 call);
    sends_queued_ = true;
  });
}

void NcclProcessGroup::Impl::recv(void* data, int64_t bytes, int from) {
  const std::string operation =
      "NCCL receive of " + elementCountText(bytes, "bytes") + " from rank " + std::to_string(from);
  checkPeer(operation, from);
  if (bytes <= 0) return;
  useDevice();
  const bool staged = !checkedKind(data, operation).on_device;
  collective(operation, [&](const Call& call) {
    void* buffer = staged ? staging_.reserve(static_cast<size_t>(bytes)) : data;
    waitForCompute();  // queued work may still read the buffer's old contents
    awaitStarted(ncclRecv(buffer, static_cast<size_t>(bytes), ncclUint8, from, comm_->get(), stream_.get()),
                 call);
    awaitStream(call);
    if (staged) copyToHost(data, buffer, static_cast<size_t>(bytes), call);
  });
}

void NcclProcessGroup::Impl::waitSends() {
  if (!sends_queued_) return;
  useDevice();
  collective("NCCL sends", [&](const Call& call) { awaitStream(call); });
  sends_queued_ = false;
  send_copies_used_ = 0;
}

// NcclProcessGroup ----------------------------------------------------------

NcclProcessGroup::NcclProcessGroup(Store& store, const std::string& key_prefix, int rank, int size,
                                   int device, cudaStream_t compute_stream, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(store, key_prefix, rank, size, device, compute_stream, timeout)) {}

NcclProcessGroup::~NcclProcessGroup() = default;

int NcclProcessGroup::rank() const { return impl_->rank; }
int NcclProcessGroup::size() const { return impl_->size; }
std::string NcclProcessGroup::describe() const {
  return "nccl (device " + std::to_string(impl_->device) + ")";
}

void NcclProcessGroup::allReduceSum(float* data, int64_t n) {
  impl_->allReduceSum(data, n, ncclFloat, "floats");
}

void NcclProcessGroup::allReduceSum(double* data, int64_t n) {
  impl_->allReduceSum(data, n, ncclDouble, "doubles");
}

void NcclProcessGroup::broadcast(float* data, int64_t n, int root) {
  impl_->broadcast(data, n, sizeof(float), ncclFloat, "floats", root);
}

void NcclProcessGroup::broadcastBytes(uint8_t* data, int64_t n, int root) {
  impl_->broadcast(data, n, 1, ncclUint8, "bytes", root);
}

void NcclProcessGroup::allGather(const float* in, int64_t n, float* out) { impl_->allGather(in, n, out); }

void NcclProcessGroup::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  impl_->reduceScatterSum(data, counts);
}

void NcclProcessGroup::barrier() { impl_->barrier(); }

void NcclProcessGroup::sendAsync(const void* data, int64_t bytes, int to, uint32_t) {
  impl_->sendAsync(data, bytes, to);
}

void NcclProcessGroup::recv(void* data, int64_t bytes, int from, uint32_t) { impl_->recv(data, bytes, from); }

void NcclProcessGroup::waitSends() { impl_->waitSends(); }

void NcclProcessGroup::abandon() { impl_->abandoned_ = true; }

}  // namespace dtrain
