// Owners of CUDA streams and events: created on construction, destroyed with
// the object (errors at destruction are ignored: the device may be failing).
#pragma once
#include <cuda_runtime.h>

namespace dtrain {

class CudaStream {
 public:
  CudaStream();  // a non-blocking stream on the current device
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for everything queued (counted: core/backend/device_waits.h).
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent();  // without timing: the cheap kind, for ordering streams
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(const CudaStream& on) { record(on.get()); }
  void record(cudaStream_t on);
  // Work queued on `stream` from now on waits until this event has happened.
  void makeWait(const CudaStream& stream) const { makeWait(stream.get()); }
  void makeWait(cudaStream_t stream) const;
  // Waits for the event (counted: core/backend/device_waits.h).
  void synchronize() const;
  // Waits for the event, when the host has queued whole steps behind it:
  // counted as back-pressure, not as a wait that may run the device dry.
  void waitAhead() const;
  // Whether the work before its record has finished; never waits.
  bool done() const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace dtrain
