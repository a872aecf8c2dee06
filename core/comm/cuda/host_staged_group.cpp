#include "core/comm/cuda/host_staged_group.h"

#include <numeric>
#include <utility>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/pointer_kind.h"
#include "core/backend/device_query.h"
#include "core/comm/collective_checks.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// Checks the constructor's arguments and makes `device` current on the
// calling thread (the copy stream and event are made on it next); returns it.
int checkedDevice(const ProcessGroup* host, int device) {
  if (!host) throw CommError("host-staged group: no host process group to stage for");
  const int visible = visibleCudaDevices();
  if (device < 0 || device >= visible)
    throw DeviceError("host-staged group (" + host->describe() + ", rank " + std::to_string(host->rank()) +
                      "): there is no CUDA device " + std::to_string(device) + " (" +
                      (visible == 0 ? std::string("none is visible")
                                    : "devices 0 to " + std::to_string(visible - 1) + " are visible") +
                      ")");
  checkCuda(cudaSetDevice(device), "select the group's device");
  return device;
}

}  // namespace

HostStagedGroup::HostStagedGroup(std::shared_ptr<ProcessGroup> host_group, int device,
                                 cudaStream_t compute_stream)
    : host_(std::move(host_group)), device_(checkedDevice(host_.get(), device)), compute_(compute_stream) {}

int HostStagedGroup::rank() const { return host_->rank(); }
int HostStagedGroup::size() const { return host_->size(); }
std::string HostStagedGroup::describe() const { return host_->describe() + ", staged through host memory"; }

bool HostStagedGroup::onDevice(const void* data) {
  // The current device first: asking CUDA on a thread without one would
  // open a context on device 0 for nothing.
  checkCuda(cudaSetDevice(device_), "select the group's device");
  return isDevicePointer(data);
}

void HostStagedGroup::beginStaging() {
  // Copies out of a device buffer must see what the compute stream wrote to
  // it, and copies into one must not overtake kernels still reading it.
  checkCuda(cudaEventRecord(computeReady_.get(), compute_), "mark the work queued on the compute stream");
  computeReady_.makeWait(copies_);
}

void HostStagedGroup::copy(void* to, const void* from, size_t bytes) {
  checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, copies_.get()), "copy a staged buffer");
}

void HostStagedGroup::finishCopies() { copies_.synchronize(); }

template <typename T>
void HostStagedGroup::allReduceStaged(T* data, int64_t n) {
  // The host group checks the count and answers an empty call.
  if (n <= 0 || !onDevice(data)) return host_->allReduceSum(data, n);
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  beginStaging();
  T* host = static_cast<T*>(staging_.reserve(bytes));
  copy(host, data, bytes);
  finishCopies();
  host_->allReduceSum(host, n);
  copy(data, host, bytes);
  finishCopies();
}

template <typename T>
void HostStagedGroup::broadcastStaged(T* data, int64_t n, int root,
                                      void (ProcessGroup::*hostBroadcast)(T*, int64_t, int)) {
  if (n <= 0 || !onDevice(data)) return (host_.get()->*hostBroadcast)(data, n, root);
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  const bool isRoot = rank() == root;
  beginStaging();
  T* host = static_cast<T*>(staging_.reserve(bytes));
  if (isRoot) {
    copy(host, data, bytes);
    finishCopies();
  }
  (host_.get()->*hostBroadcast)(host, n, root);
  if (!isRoot) {
    copy(data, host, bytes);
    finishCopies();
  }
}

void HostStagedGroup::allReduceSum(float* data, int64_t n) { allReduceStaged(data, n); }
void HostStagedGroup::allReduceSum(double* data, int64_t n) { allReduceStaged(data, n); }

void HostStagedGroup::broadcast(float* data, int64_t n, int root) {
  broadcastStaged<float>(data, n, root, &ProcessGroup::broadcast);
}

void HostStagedGroup::broadcastBytes(uint8_t* data, int64_t n, int root) {
  broadcastStaged<uint8_t>(data, n, root, &ProcessGroup::broadcastBytes);
}

void HostStagedGroup::allGather(const float* in, int64_t n, float* out) {
  if (n <= 0) return host_->allGather(in, n, out);
  const bool inOnDevice = onDevice(in), outOnDevice = onDevice(out);
  if (!inOnDevice && !outOnDevice) return host_->allGather(in, n, out);
  const size_t inBytes = static_cast<size_t>(n) * sizeof(float);
  const size_t outBytes = inBytes * static_cast<size_t>(size());
  beginStaging();
  // The staging buffer holds the output first, then the input: separate, so
  // an in-place gather on the device stays correct.
  char* pinned =
      static_cast<char*>(staging_.reserve((outOnDevice ? outBytes : 0) + (inOnDevice ? inBytes : 0)));
  float* output = outOnDevice ? reinterpret_cast<float*>(pinned) : out;
  const float* input = in;
  if (inOnDevice) {
    float* staged = reinterpret_cast<float*>(pinned + (outOnDevice ? outBytes : 0));
    copy(staged, in, inBytes);
    finishCopies();
    input = staged;
  }
  host_->allGather(input, n, output);
  if (outOnDevice) {
    copy(out, output, outBytes);
    finishCopies();
  }
}

void HostStagedGroup::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  const int64_t total = reduceScatterTotal(counts, size());  // the host group's checks, before any copy
  if (total == 0 || !onDevice(data)) return host_->reduceScatterSum(data, counts);
  const size_t bytes = static_cast<size_t>(total) * sizeof(float);
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank(), int64_t(0));
  const int64_t mine = counts[static_cast<size_t>(rank())];
  beginStaging();
  auto* host = static_cast<float*>(staging_.reserve(bytes));
  copy(host, data, bytes);
  finishCopies();
  host_->reduceScatterSum(host, counts);
  // Only this rank's segment is specified afterwards: only it goes back.
  if (mine > 0) {
    copy(data + offset, host + offset, static_cast<size_t>(mine) * sizeof(float));
    finishCopies();
  }
}

void HostStagedGroup::barrier() { host_->barrier(); }

}  // namespace dtrain
