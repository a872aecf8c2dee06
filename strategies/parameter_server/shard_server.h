// A parameter-server shard: one process holding its share of the parameters
// (the concatenation of its placed ranges) and the optimizer's state for
// them, applying the workers' gradients. It knows no model: the chief's Init
// says how many floats it holds.
//
// Synchronous updates: the shard applies update t once, when every worker's
// push of t has arrived, summing the pushes in worker order (so the sum does
// not depend on arrival order), and then answers each worker with the new
// parameters. A push is identified by (worker, update): a duplicate of a
// pending push is dropped, a push of an update already applied is answered
// with the current parameters (a retry whose answer was lost), so each is
// applied exactly once; a message of another rendezvous generation is
// refused.
//
// Not thread-safe: serve() runs on the shard's main thread.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/config/job_config.h"
#include "core/optim/optimizer.h"
#include "strategies/parameter_server/ps_wire.h"

namespace dtrain {

class ShardServer {
 public:
  // Binds a ROUTER socket on `host` (port chosen by the system).
  ShardServer(const JobConfig& job, int shard, int workers, uint64_t generation, const std::string& host);
  ~ShardServer();

  // "tcp://host:port", for the workers.
  const std::string& endpoint() const { return endpoint_; }
  // Serves until the chief's Stop. Throws CommError when nothing arrives for
  // `idle_timeout_s` (the workers are gone without a word).
  void serve(double idle_timeout_s);

  // What serve() has done, for logs and tests.
  int64_t version() const { return version_; }
  int64_t requests() const { return requests_; }

 private:
  void handle(const ps::Message& m, const std::string& routing);
  void init(const ps::Message& m, const std::string& routing);
  void push(const ps::Message& m, const std::string& routing);
  void applyPending();
  void replyParams(const std::string& routing, int worker);
  void refuse(const ps::Header& h, const std::string& routing, const std::string& why);

  const JobConfig& job_;
  int shard_, workers_;
  uint64_t generation_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;

  bool initialized_ = false, stopped_ = false;
  std::vector<float> params_, summed_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t version_ = 0;  // updates applied (the chief's Init sets where it starts)
  // The pushes of update version_ + 1, per worker, and where to answer.
  std::vector<std::vector<float>> pending_;
  std::vector<bool> arrived_;
  std::vector<std::string> reply_to_;
  double pending_lr_ = 0;
  int64_t requests_ = 0;
};

}  // namespace dtrain
