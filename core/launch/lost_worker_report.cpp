#include "core/launch/lost_worker_report.h"

#include <unistd.h>

#include <utility>

#include "core/comm/rendezvous_channel.h"
#include "core/comm/wire.h"
#include "core/errors.h"

namespace dtrain {

LostWorkerReport::LostWorkerReport(std::string coordinator, std::string job_id, std::string token)
    : coordinator_(std::move(coordinator)), job_id_(std::move(job_id)), token_(std::move(token)) {}

LostWorkerReport::~LostWorkerReport() = default;

std::string LostWorkerReport::send(int node, int pid, const std::string& why) {
  try {
    if (!channel_)
      channel_ = std::make_unique<RendezvousChannel>(
          coordinator_, "h" + std::to_string(node) + "." + std::to_string(::getpid()), ClientTimeouts{});
    wire::ReportLost report;
    report.job_id = job_id_;
    report.token = token_;
    report.node = node;
    report.pid = pid;
    report.why = why;
    channel_->call(report, RendezvousClock::now() + std::chrono::seconds(2), std::chrono::milliseconds(0),
                   [&] { return "no answer from the coordinator at " + coordinator_ + " within 2 s"; });
    return "";
  } catch (const CommError& e) {
    return e.what();
  }
}

}  // namespace dtrain
