#include "core/backend/cuda/nccl_communicator.h"

#include "core/backend/cuda/poll_with_backoff.h"
#include "core/errors.h"
#include "core/util/seconds.h"

namespace dtrain {

namespace {

// NCCL's last message as one clause: its line breaks would split our one-line errors.
std::string oneLine(const char* text) {
  std::string line;
  for (const char* c = text; c && *c; ++c) line += (*c == '\n' || *c == '\r') ? ' ' : *c;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace

std::string ncclErrorText(ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  // The last message is NCCL's, not the communicator's: the argument is unused.
  const std::string last = oneLine(ncclGetLastError(nullptr));
  if (!last.empty()) text += " (NCCL: " + last + ")";
  return text;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, int size, Clock::time_point deadline,
                                   std::chrono::milliseconds timeout, const std::string& who)
    : timeout_(timeout) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t begun = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
  if (begun != ncclSuccess && begun != ncclInProgress) {
    const std::string why = ncclErrorText(begun);
    abort();
    throw CommError(who + ": NCCL could not begin joining the group: " + why);
  }
  ncclResult_t now = begun;
  const bool settled = pollWithBackoff(
      [&] {
        now = state();
        return now != ncclInProgress;
      },
      deadline);
  if (!settled) {
    abort();
    throw CommError(who + ": the ranks did not all join the NCCL group within " + durationText(timeout) +
                    "; a peer never came (start every rank, or raise the timeout)");
  }
  if (now != ncclSuccess) {
    const std::string why = ncclErrorText(now);
    abort();
    throw CommError(who + ": joining the NCCL group failed: " + why);
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  // Finalizing waits for the peers' share of the last calls (NCCL may route
  // their traffic through this rank); only after it has finished does
  // ncclCommDestroy free everything without blocking.
  const ncclResult_t begun = ncclCommFinalize(comm_);
  ncclResult_t now = begun;
  const bool finalized = (begun == ncclSuccess || begun == ncclInProgress) &&
                         pollWithBackoff(
                             [&] {
                               now = state();
                               return now != ncclInProgress;
                             },
                             Clock::now() + timeout_) &&
                         now == ncclSuccess;
  if (finalized)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
  comm_ = nullptr;
}

ncclResult_t NcclCommunicator::state() const {
  if (!comm_) return ncclInvalidUsage;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm_, &async);
  return asked != ncclSuccess ? asked : async;
}

void NcclCommunicator::abort() {
  if (!comm_) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace dtrain
