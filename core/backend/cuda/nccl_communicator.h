// NcclCommunicator: one rank's NCCL communicator, owned. It is created
// non-blocking (NCCL's calls return at once and report "in progress"), so
// every wait on it (joining, each call being started, closing) is polled
// against a deadline and can end in ncclCommAbort instead of a hang. Internal
// to NcclProcessGroup.
//
// Threading: one thread at a time, with the communicator's device current.
#pragma once
#include <nccl.h>

#include <chrono>
#include <string>

namespace dtrain {

// "remote process exited or there was a network error (NCCL: <its last
// message>)": NCCL's words for `result`, and its last message when it left one.
std::string ncclErrorText(ncclResult_t result);

class NcclCommunicator {
 public:
  using Clock = std::chrono::steady_clock;

  // Joins the communicator `id` names as `rank` of `size`, on the calling
  // thread's current device. Throws CommError (having aborted what was begun)
  // when NCCL fails or the ranks have not all joined by `deadline`. `who`
  // begins the messages; `timeout` is the one they name and the one closing
  // waits for the peers.
  NcclCommunicator(const ncclUniqueId& id, int rank, int size, Clock::time_point deadline,
                   std::chrono::milliseconds timeout, const std::string& who);
  // Closes in order (ncclCommFinalize, polled up to the timeout, then
  // ncclCommDestroy), or aborts when that fails or runs out of time. Does
  // nothing after abort(). Never throws.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }

  // ncclSuccess, ncclInProgress (a call is still being started), or the
  // error that broke the communicator (a peer gone, the network failed).
  ncclResult_t state() const;

  // Makes what still runs on the device quit and frees the communicator;
  // later calls of abort() do nothing. Never throws.
  void abort();

 private:
  ncclComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
};

}  // namespace dtrain
