#include "core/backend/cuda/cuda_handles.h"

#include <utility>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/device_waits.h"

namespace dtrain {

CudaStream::CudaStream() {
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create a stream");
}

CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::synchronize() const {
  noteDeviceWait();
  checkCuda(cudaStreamSynchronize(stream_), "synchronise a stream");
}

CudaEvent::CudaEvent() {
  checkCuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "create an event");
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::record(cudaStream_t on) { checkCuda(cudaEventRecord(event_, on), "record an event"); }

void CudaEvent::makeWait(cudaStream_t stream) const {
  checkCuda(cudaStreamWaitEvent(stream, event_, 0), "make a stream wait for an event");
}

void CudaEvent::synchronize() const {
  noteDeviceWait();
  checkCuda(cudaEventSynchronize(event_), "wait for an event");
}

void CudaEvent::waitAhead() const {
  noteHostAheadWait();
  checkCuda(cudaEventSynchronize(event_), "wait for an event");
}

bool CudaEvent::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: the work is still queued
    return false;
  }
  checkCuda(status, "ask whether an event has happened");
  return true;
}

}  // namespace dtrain
