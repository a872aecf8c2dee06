// A host's word to the coordinator that one of its workers died, for an
// elastic run's hosts other than node 0 (node 0 serves the coordinator in its
// own process): the coordinator then loses the worker at once instead of
// after its silence, so a worker that died while the group re-formed costs
// no heartbeat timeout. A report that cannot be delivered is only a slower
// recovery: it is noted in the host's log, never fatal.
// Threading: one thread (the host's wait loop).
#pragma once
#include <memory>
#include <string>

namespace dtrain {

class RendezvousChannel;

class LostWorkerReport {
 public:
  // `coordinator` is "tcp://HOST:PORT"; job id and token as the workers join with.
  LostWorkerReport(std::string coordinator, std::string job_id, std::string token);
  ~LostWorkerReport();
  LostWorkerReport(const LostWorkerReport&) = delete;
  LostWorkerReport& operator=(const LostWorkerReport&) = delete;

  // Tells the coordinator that process `pid` of node `node` is gone; waits up
  // to 2 s for its answer. Returns "" when it answered, else why not.
  std::string send(int node, int pid, const std::string& why);

 private:
  std::string coordinator_, job_id_, token_;
  std::unique_ptr<RendezvousChannel> channel_;  // connected on the first report
};

}  // namespace dtrain
