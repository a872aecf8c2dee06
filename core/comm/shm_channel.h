// ShmChannel: a one-way stream of bytes from one process to another on the
// same host, through a ring buffer in shared memory. The sender copies each
// message in and the receiver copies it out, each in its own thread: no
// third thread carries the bytes, so on a machine whose cores are all
// computing a message does not wait for one to be scheduled (a pipeline's
// stage-to-stage messages).
//
// The receiving end creates the segment and publishes its name in the store
// under `key`; the sending end opens it (within the timeout) and removes the
// name, so a run killed later leaves nothing in /dev/shm. A send larger than
// the free space goes in as the receiver makes room; a side waiting spins
// briefly, then sleeps in short naps, and every few milliseconds checks
// that the other process still exists: a peer that has exited, or that does
// not take or give bytes within the timeout, makes the call throw CommError
// naming `peer`.
//
// One sending and one receiving thread; not otherwise thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/comm/shm_segment.h"
#include "core/comm/store.h"

namespace dtrain {

class ShmChannel {
 public:
  // The receiving end, holding up to `capacity` bytes in flight.
  static std::unique_ptr<ShmChannel> receiver(Store& store, const std::string& key, int64_t capacity,
                                              std::string peer, std::chrono::milliseconds timeout);
  // The sending end of the channel the receiver published under `key`.
  static std::unique_ptr<ShmChannel> sender(Store& store, const std::string& key, std::string peer,
                                            std::chrono::milliseconds timeout);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  void send(const void* data, int64_t bytes);
  void recv(void* data, int64_t bytes);

 private:
  struct Ring;
  ShmChannel(std::unique_ptr<ShmSegment> segment, std::string peer, std::chrono::milliseconds timeout);
  // Waits until `ready` holds; throws naming the peer when it is gone or the timeout passes.
  template <typename Ready>
  void await(Ready&& ready, const char* what);

  std::unique_ptr<ShmSegment> segment_;
  Ring* ring_;
  uint8_t* data_;
  int64_t capacity_;
  std::string peer_;
  std::chrono::milliseconds timeout_;
  bool sending_ = false;
};

}  // namespace dtrain
