#include "strategies/parameter_server/shard_server.h"

#include <chrono>
#include <cstring>

#include "core/comm/rendezvous_socket.h"
#include "core/errors.h"

namespace dtrain {

namespace {

std::string workerName(int w) { return "worker " + std::to_string(w); }

}  // namespace

ShardServer::ShardServer(const JobConfig& job, int shard, int workers, uint64_t generation,
                         const std::string& host)
    : job_(job),
      shard_(shard),
      workers_(workers),
      generation_(generation),
      context_(1),
      socket_(context_, zmq::socket_type::router),
      pending_(static_cast<size_t>(workers)),
      arrived_(static_cast<size_t>(workers), false),
      reply_to_(static_cast<size_t>(workers)) {
  socket_.set(zmq::sockopt::linger, 0);
  bindOrExplain(socket_, "tcp://" + host + ":0");
  endpoint_ = "tcp://" + host + ":" + std::to_string(boundPort(socket_));
}

ShardServer::~ShardServer() = default;

void ShardServer::serve(double idle_timeout_s) {
  auto last = std::chrono::steady_clock::now();
  const std::string peer = "shard " + std::to_string(shard_) + "'s port";
  while (!stopped_) {
    ps::Message m;
    std::string routing;
    if (!ps::receive(socket_, m, 200, peer, &routing)) {
      const double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
      if (idle > idle_timeout_s)
        throw CommError("parameter-server shard " + std::to_string(shard_) + ": no worker has spoken for " +
                        std::to_string(static_cast<int>(idle)) + " s; stopping");
      continue;
    }
    last = std::chrono::steady_clock::now();
    ++requests_;
    handle(m, routing);
  }
}

void ShardServer::refuse(const ps::Header& h, const std::string& routing, const std::string& why) {
  ps::Header reply = h;
  reply.shard = shard_;
  reply.generation = generation_;
  ps::sendFailure(socket_, reply, "shard " + std::to_string(shard_) + ": " + why, &routing);
}

void ShardServer::handle(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  if (h.generation != generation_) {
    refuse(h, routing,
           "a " + std::string(ps::kindName(h.kind)) + " of rendezvous generation " +
               std::to_string(h.generation) + " (this run is generation " + std::to_string(generation_) +
               "); it belongs to another run");
    return;
  }
  if (h.worker < 0 || h.worker >= workers_) {
    refuse(h, routing,
           "a message from worker " + std::to_string(h.worker) + " of a run with " +
               std::to_string(workers_) + " workers");
    return;
  }
  switch (h.kind) {
    case ps::Kind::Init:
      init(m, routing);
      return;
    case ps::Kind::Push:
      push(m, routing);
      return;
    case ps::Kind::Gather: {
      if (!initialized_) return refuse(h, routing, "gather before init");
      ps::Header reply{ps::Kind::State, h.worker, shard_, version_, 0.0, generation_, 0};
      std::vector<std::pair<const float*, int64_t>> frames = {
          {params_.data(), static_cast<int64_t>(params_.size())}};
      for (auto& [name, buffer] : optimizer_->stateBuffers())
        frames.emplace_back(buffer->data(), buffer->numel());
      ps::send(socket_, reply, frames, &routing);
      return;
    }
    case ps::Kind::Stop: {
      ps::send(socket_, ps::Header{ps::Kind::Ack, h.worker, shard_, version_, 0.0, generation_, 0}, {},
               &routing);
      stopped_ = true;
      return;
    }
    default:
      refuse(h, routing,
             std::string("a ") + ps::kindName(h.kind) + " message is not a request a shard serves");
  }
}

void ShardServer::init(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  if (h.worker != 0)
    return refuse(h, routing, "init from worker " + std::to_string(h.worker) + "; only the chief inits");
  if (m.payload.empty()) return refuse(h, routing, "init without parameters");
  std::unique_ptr<Optimizer> optimizer = makeOptimizer(job_.optimizer);
  const auto n = static_cast<int64_t>(m.payload[0].size());
  optimizer->init(n);
  auto state = optimizer->stateBuffers();
  if (m.payload.size() != state.size() + 1)
    return refuse(h, routing,
                  "init with " + std::to_string(m.payload.size() - 1) + " optimizer state buffers; " +
                      optimizer->name() + " keeps " + std::to_string(state.size()));
  for (size_t i = 0; i < state.size(); ++i) {
    if (static_cast<int64_t>(m.payload[i + 1].size()) != n)
      return refuse(h, routing,
                    "init's " + state[i].first + " holds " + std::to_string(m.payload[i + 1].size()) +
                        " floats, the parameters " + std::to_string(n));
    std::memcpy(state[i].second->data(), m.payload[i + 1].data(), static_cast<size_t>(n) * sizeof(float));
  }
  params_ = m.payload[0];
  summed_.assign(params_.size(), 0.0f);
  optimizer_ = std::move(optimizer);
  version_ = h.update;
  initialized_ = true;
  ps::send(socket_, ps::Header{ps::Kind::Ack, 0, shard_, version_, 0.0, generation_, 0}, {}, &routing);
}

void ShardServer::push(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  const auto w = static_cast<size_t>(h.worker);
  if (m.payload.size() != 1)
    return refuse(h, routing, "a push with " + std::to_string(m.payload.size()) + " frames");
  // The workers push only once the chief's init is answered (they meet at a barrier after it).
  if (!initialized_) return refuse(h, routing, workerName(h.worker) + " pushed before the chief's init");
  if (h.update <= version_) {
    // Applied already: a retry whose answer was lost gets the parameters again.
    replyParams(routing, h.worker);
    return;
  }
  if (h.update != version_ + 1)
    return refuse(h, routing,
                  workerName(h.worker) + " pushed update " + std::to_string(h.update) +
                      " while the shard is at " + std::to_string(version_) + "; the workers are out of step");
  if (m.payload[0].size() != params_.size())
    return refuse(h, routing,
                  workerName(h.worker) + " pushed " + std::to_string(m.payload[0].size()) +
                      " gradients for " + std::to_string(params_.size()) + " parameters");
  if (arrived_[w]) return;  // a duplicate of a pending push: the first one counts
  pending_[w] = m.payload[0];
  arrived_[w] = true;
  reply_to_[w] = routing;
  if (h.worker == 0) pending_lr_ = h.lr;  // every worker schedules the same; the chief's is used
  applyPending();
}

void ShardServer::applyPending() {
  for (bool a : arrived_)
    if (!a) return;
  // In worker order, whatever order they arrived in.
  std::memcpy(summed_.data(), pending_[0].data(), summed_.size() * sizeof(float));
  for (size_t w = 1; w < pending_.size(); ++w) {
    const float* g = pending_[w].data();
    for (size_t i = 0; i < summed_.size(); ++i) summed_[i] += g[i];
  }
  optimizer_->update(params_.data(), summed_.data(), 0, static_cast<int64_t>(params_.size()),
                     StepInfo{pending_lr_, version_ + 1});
  ++version_;
  for (size_t w = 0; w < pending_.size(); ++w) {
    replyParams(reply_to_[w], static_cast<int>(w));
    arrived_[w] = false;
  }
}

void ShardServer::replyParams(const std::string& routing, int worker) {
  ps::send(socket_, ps::Header{ps::Kind::Params, worker, shard_, version_, 0.0, generation_, 0},
           {{params_.data(), static_cast<int64_t>(params_.size())}}, &routing);
}

}  // namespace dtrain
