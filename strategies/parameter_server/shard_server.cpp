#include "strategies/parameter_server/shard_server.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/comm/rendezvous_socket.h"
#include "core/errors.h"
#include "core/optim/grad_clip.h"

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
      consistency_(job.strategy.consistency),
      staleness_bound_(job.strategy.staleness),
      scale_lr_(job.strategy.scale_lr_by_staleness),
      pending_(static_cast<size_t>(workers)),
      arrived_(static_cast<size_t>(workers), false),
      figures_(static_cast<size_t>(workers)),
      figures_in_(static_cast<size_t>(workers), false),
      pusher_(static_cast<size_t>(workers), -1),
      awaiting_(static_cast<size_t>(workers), false),
      parts_seen_(static_cast<size_t>(workers)),
      floats_in_(static_cast<size_t>(workers), 0),
      reply_to_(static_cast<size_t>(workers)),
      memory_(static_cast<size_t>(workers)),
      answer_written_(static_cast<size_t>(workers), false),
      clocks_(static_cast<size_t>(workers), 0),
      waiting_(static_cast<size_t>(workers), false),
      staleness_of_(static_cast<size_t>(workers), 0),
      done_(static_cast<size_t>(workers)),
      lost_(static_cast<size_t>(workers), false),
      live_(workers) {
  socket_.set(zmq::sockopt::linger, 0);
  const bool ipc = host.rfind("ipc://", 0) == 0;
  const std::string bind = ipc ? host : "tcp://" + host + ":0";
  try {
    socket_.bind(bind);
  } catch (const zmq::error_t& e) {
    throw CommError("parameter-server shard " + std::to_string(shard) + " cannot listen on " + bind + ": " +
                    e.what());
  }
  endpoint_ = ipc ? host : "tcp://" + host + ":" + std::to_string(boundPort(socket_));
  if (const char* path = std::getenv("DTRAIN_TEST_PS_APPLIED_LOG"))
    applied_log_ = std::fopen((std::string(path) + ".shard" + std::to_string(shard)).c_str(), "a");
}

ShardServer::~ShardServer() {
  if (applied_log_) std::fclose(applied_log_);
}

void ShardServer::serve(double idle_timeout_s) {
  started_ = std::chrono::steady_clock::now();
  auto last = std::chrono::steady_clock::now();
  const std::string peer = "shard " + std::to_string(shard_) + "'s port";
  while (!stopped_) {
    ps::Message m;
    std::string routing;
    bool got = false;
    checkLosses();
    try {
      got = ps::receive(socket_, m, 100, peer, &routing);
    } catch (const CommError& e) {
      // Garbage on the port (a scanner, another program): said, and ignored.
      std::fprintf(stderr, "dtrain: parameter-server shard %d: ignored a message: %s\n", shard_, e.what());
      ++ignored_;
      continue;
    }
    if (!got) {
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

void ShardServer::checkLosses() {
  if (!watch_.lost) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_watch_ < std::chrono::milliseconds(100)) return;
  last_watch_ = now;
  for (int w : watch_.lost())
    if (w >= 0 && w < workers_ && !lost_[static_cast<size_t>(w)]) dropWorker(w);
}

void ShardServer::dropWorker(int worker) {
  const auto w = static_cast<size_t>(worker);
  lost_[w] = true;
  --live_;
  waiting_[w] = false;
  awaiting_[w] = false;
  std::fprintf(stderr, "dtrain: parameter-server shard %d: worker %d lost after its update %lld\n", shard_,
               worker, static_cast<long long>(clocks_[w]));
  if (watch_.publish) watch_.publish(worker, done_[w]);
  // Sync: the update still waits for its slice, which a survivor pushes in
  // its place (the slice's parts it sent stay). Else the slowest clock no
  // longer counts it: workers waiting for it go on.
  if (consistency_ != "sync") answerWaiting();
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
    case ps::Kind::Attach:
      attachMemory(m, routing);
      return;
    case ps::Kind::PushPart:
      pushPart(m, routing);
      return;
    case ps::Kind::Figures:
      sliceFigures(m, routing);
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
  // The parameters, the optimizer's state, and optionally one flag per
  // parameter saying whether the weight decay applies (none: it applies to all).
  if (m.payload.size() != state.size() + 1 && m.payload.size() != state.size() + 2)
    return refuse(h, routing,
                  "init with " + std::to_string(m.payload.size() - 1) + " buffers after the parameters; " +
                      optimizer->name() + " keeps " + std::to_string(state.size()) +
                      " state buffers, and a decay mask may follow them");
  if (m.payload.size() == state.size() + 2) {
    const ps::FloatFrame& flags = m.payload.back();
    if (static_cast<int64_t>(flags.size()) != n)
      return refuse(h, routing,
                    "init's decay mask holds " + std::to_string(flags.size()) + " flags, the parameters " +
                        std::to_string(n));
    optimizer->setDecayMask(DecayMask::fromFlags(flags.data(), n));
  }
  for (size_t i = 0; i < state.size(); ++i) {
    if (static_cast<int64_t>(m.payload[i + 1].size()) != n)
      return refuse(h, routing,
                    "init's " + state[i].first + " holds " + std::to_string(m.payload[i + 1].size()) +
                        " floats, the parameters " + std::to_string(n));
    std::memcpy(state[i].second->data(), m.payload[i + 1].data(), static_cast<size_t>(n) * sizeof(float));
  }
  params_ = m.payload[0].toVector();
  summed_.assign(params_.size(), 0.0f);
  optimizer_ = std::move(optimizer);
  version_ = h.update;
  clocks_.assign(static_cast<size_t>(workers_), h.update);  // every worker resumes at the chief's step
  initialized_ = true;
  ps::send(socket_, ps::Header{ps::Kind::Ack, 0, shard_, version_, 0.0, generation_, 0}, {}, &routing);
}

void ShardServer::attachMemory(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  try {
    memory_[static_cast<size_t>(h.worker)] = ShardMemory::open(h.region_pid, h.region_fd, h.offset);
  } catch (const Error& e) {
    return refuse(h, routing, workerName(h.worker) + "'s shared memory: " + e.what());
  }
  ps::send(socket_, ps::Header{ps::Kind::Ack, h.worker, shard_, version_, 0.0, generation_, 0}, {}, &routing);
}

ShardMemory* ShardServer::memoryOf(int worker) {
  ShardMemory* memory = memory_[static_cast<size_t>(worker)].get();
  return memory && memory->floats() == static_cast<int64_t>(params_.size()) ? memory : nullptr;
}

const float* ShardServer::pushedGradients(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  ShardMemory* memory = memory_[static_cast<size_t>(h.worker)].get();
  int64_t floats = 0;
  if (h.shared) {
    if (!m.payload.empty() || !memory) {
      refuse(h, routing, workerName(h.worker) + " pushed through shared memory it has not attached");
      return nullptr;
    }
    floats = memory->floats();
  } else {
    if (m.payload.size() != 1) {
      refuse(h, routing, "a push with " + std::to_string(m.payload.size()) + " frames");
      return nullptr;
    }
    floats = static_cast<int64_t>(m.payload[0].size());
  }
  if (floats != static_cast<int64_t>(params_.size())) {
    refuse(h, routing,
           workerName(h.worker) + " pushed " + std::to_string(floats) + " gradients for " +
               std::to_string(params_.size()) + " parameters");
    return nullptr;
  }
  return h.shared ? memory->grads() : m.payload[0].data();
}

void ShardServer::push(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  const auto w = static_cast<size_t>(h.worker);
  // The workers push only once the chief's init is answered (they meet at a barrier after it).
  if (!initialized_) return refuse(h, routing, workerName(h.worker) + " pushed before the chief's init");
  if (lost_[w])
    return refuse(
        h, routing,
        workerName(h.worker) +
            " was lost and dropped from the run (the others took over its samples); it may not push");
  // Sync: a survivor pushes a lost worker's slice in its place.
  const int slice = sliceOf(h);
  if (h.update <= clocks_[w]) {
    // Applied already: a retry whose answer was lost gets the parameters
    // again (unless its answer still waits for the slowest worker); a slice
    // pushed for a lost worker that arrived by other means needs no answer.
    if (!waiting_[w] && slice == h.worker) replyParams(routing, h.worker, h.update, 0, false);
    return;
  }
  if (h.update != clocks_[w] + 1)
    return refuse(h, routing,
                  workerName(h.worker) + " pushed update " + std::to_string(h.update) + " after its update " +
                      std::to_string(clocks_[w]) + "; a push was lost");
  const float* grads = pushedGradients(m, routing);
  if (!grads) return;
  if (consistency_ == "sync") {
    const auto sl = static_cast<size_t>(slice);
    if (slice == h.worker) {  // its own: it awaits the answer
      awaiting_[w] = true;
      reply_to_[w] = routing;
    }
    pending_lr_ = h.lr;  // every worker schedules the same learning rate
    if (!figures_in_[sl]) {
      figures_[sl] = h.figures;
      figures_in_[sl] = true;
    }
    if (!arrived_[sl]) {  // else a duplicate of a pending push: the first one counts
      pending_[sl].assign(grads, grads + params_.size());
      arrived_[sl] = true;
      pusher_[sl] = h.worker;
      // It holds the parts not sent (a push sent whole after its parts, or instead of them).
      for (auto& [offset, part] : parts_)
        if (!parts_seen_[sl].count(offset)) ++part.arrived;
      sumReadyParts();
    }
    applyPending();
    return;
  }
  // Asynchronous: applied at once, at the learning rate the schedule gives
  // the chief's step (the run's step, which checkpoints and resumes count;
  // the pushing worker's own until the chief's first push), divided by
  // 1 + the push's staleness when the job asks.
  if (h.worker == 0) chief_lr_ = h.lr;
  const double scheduled = chief_lr_ >= 0 ? chief_lr_ : h.lr;
  const int64_t staleness = version_ - h.version;  // updates applied since the worker's parameters
  const double lr =
      scale_lr_ ? scheduled / static_cast<double>(1 + std::max<int64_t>(0, staleness)) : scheduled;
  applyAsync(h.worker, grads, StepInfo{lr, version_ + 1});
  ++version_;
  clocks_[w] = h.update;
  // What the push covers, for a handover should this worker be lost.
  if (h.batch >= 0 && h.slice == h.worker)
    done_[w].own_upto = std::max(done_[w].own_upto, h.batch);
  else if (h.batch >= 0 && h.slice >= 0)
    done_[w].others.emplace(h.batch, h.slice);
  if (applied_log_) {
    const double now_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    std::fprintf(applied_log_, "%d %lld %d %.6f\n", h.worker, static_cast<long long>(h.batch), h.slice,
                 now_s);
    std::fflush(applied_log_);
  }
  stats_.record(staleness);
  waiting_[w] = true;
  reply_to_[w] = routing;
  staleness_of_[w] = staleness;
  answerWaiting();
}

void ShardServer::applyAsync(int worker, const float* grads, const StepInfo& info) {
  const auto n = static_cast<int64_t>(params_.size());
  ShardMemory* memory = memoryOf(worker);
  // Only async answers at once: bounded may hold the answer while others' pushes change the parameters.
  if (!memory || consistency_ != "async") {
    optimizer_->update(params_.data(), grads, 0, n, info);
    return;
  }
  constexpr int64_t kChunk = 4096;  // 16 KB of each array: in L1 between the update and the copy
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    optimizer_->update(params_.data(), grads, c, end, info);
    ShardMemory::streamInto(memory->params() + c, params_.data() + c, end - c);
  }
  answer_written_[static_cast<size_t>(worker)] = true;
}

int64_t ShardServer::slowestClock() const {
  int64_t slowest = clocks_[0];  // the chief is never lost
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (!lost_[w]) slowest = std::min(slowest, clocks_[w]);
  return slowest;
}

void ShardServer::answerWaiting() {
  // Bounded staleness: a worker at clock c goes on only once every worker
  // has reached c - staleness (Ho et al.'s stale synchronous parallel).
  const int64_t slowest = slowestClock();
  for (size_t w = 0; w < waiting_.size(); ++w) {
    if (!waiting_[w]) continue;
    const int64_t ahead = clocks_[w] - slowest;
    if (consistency_ == "bounded" && ahead > staleness_bound_) continue;
    stats_.max_clock_gap = std::max(stats_.max_clock_gap, ahead);
    waiting_[w] = false;
    replyParams(reply_to_[w], static_cast<int>(w), clocks_[w], staleness_of_[w], true);
  }
}

void ShardServer::pushPart(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  const auto w = static_cast<size_t>(h.worker);
  const auto n = static_cast<int64_t>(params_.size());
  if (consistency_ != "sync") return refuse(h, routing, "a push in parts outside a synchronous run");
  if (!initialized_) return refuse(h, routing, workerName(h.worker) + " pushed before the chief's init");
  ShardMemory* memory = memoryOf(h.worker);
  if (h.shared && (!m.payload.empty() || !memory))
    return refuse(h, routing,
                  workerName(h.worker) +
                      " pushed a part through shared memory it has not attached, or of another size than "
                      "this shard's " +
                      std::to_string(n) + " floats");
  if (!h.shared && m.payload.size() != 1)
    return refuse(h, routing, "a push part with " + std::to_string(m.payload.size()) + " frames");
  if (lost_[w]) return refuse(h, routing, workerName(h.worker) + " was lost and dropped from the run");
  if (h.update <= clocks_[w]) return;  // of an update applied: its answer went with the update
  if (h.update != clocks_[w] + 1)
    return refuse(h, routing,
                  workerName(h.worker) + " pushed part of update " + std::to_string(h.update) +
                      " after its update " + std::to_string(clocks_[w]) + "; a push was lost");
  const int64_t len = h.shared ? h.count : static_cast<int64_t>(m.payload[0].size());
  if (h.offset < 0 || len < 1 || h.offset > n || len > n - h.offset)
    return refuse(h, routing,
                  workerName(h.worker) + " pushed floats [" + std::to_string(h.offset) + ", " +
                      (len > INT64_MAX - std::max<int64_t>(h.offset, 0) ? std::string("...")
                                                                        : std::to_string(h.offset + len)) +
                      ") of a slice of " + std::to_string(n));
  awaiting_[w] = true;  // parts are of a worker's own slice
  reply_to_[w] = routing;
  if (arrived_[w] || parts_seen_[w].count(h.offset)) return;  // held already (a repeat)
  if (static_cast<int64_t>(pending_[w].size()) != n) pending_[w].assign(static_cast<size_t>(n), 0.0f);
  const float* floats = h.shared ? memory->grads() + h.offset : m.payload[0].data();
  std::memcpy(pending_[w].data() + h.offset, floats, static_cast<size_t>(len) * sizeof(float));
  parts_seen_[w].insert(h.offset);
  floats_in_[w] += len;
  pusher_[w] = h.worker;
  pending_lr_ = h.lr;
  auto [it, fresh] = parts_.emplace(h.offset, Part{len, 0, false});
  if (fresh)  // the slices whose whole push came first hold it too
    for (size_t v = 0; v < arrived_.size(); ++v) it->second.arrived += arrived_[v] ? 1 : 0;
  ++it->second.arrived;
  if (floats_in_[w] == n) arrived_[w] = true;
  sumReadyParts();
  applyPending();
}

void ShardServer::sliceFigures(const ps::Message& m, const std::string& routing) {
  const ps::Header& h = m.header;
  const auto w = static_cast<size_t>(h.worker);
  if (consistency_ != "sync") return refuse(h, routing, "figures outside a synchronous run");
  if (!initialized_)
    return refuse(h, routing, workerName(h.worker) + " sent figures before the chief's init");
  if (lost_[w]) return refuse(h, routing, workerName(h.worker) + " was lost and dropped from the run");
  if (h.update != clocks_[w] + 1) return;  // of an update applied (a late repeat): nothing to do
  const auto sl = static_cast<size_t>(sliceOf(h));
  awaiting_[w] = awaiting_[w] || sliceOf(h) == h.worker;
  reply_to_[w] = routing;
  if (!figures_in_[sl]) {
    figures_[sl] = h.figures;
    figures_in_[sl] = true;
  }
  applyPending();
}

int ShardServer::sliceOf(const ps::Header& h) const {
  return h.slice >= 0 && h.slice < workers_ ? h.slice : h.worker;
}

void ShardServer::sumRange(int64_t begin, int64_t end) {
  // In slice order, whatever order they arrived in and whoever pushed them.
  const size_t bytes = static_cast<size_t>(end - begin) * sizeof(float);
  std::memcpy(summed_.data() + begin, pending_[0].data() + begin, bytes);
  for (size_t w = 1; w < pending_.size(); ++w) {
    const float* g = pending_[w].data();
    for (int64_t i = begin; i < end; ++i) summed_[static_cast<size_t>(i)] += g[i];
  }
}

void ShardServer::sumReadyParts() {
  // Without clipping a part every worker has sent is summed and applied at
  // once, while the workers' backward goes on; clipping needs the whole
  // gradient's norm first, so its parts wait for the last.
  if (job_.train.grad_clip_norm > 0) return;
  for (auto& [offset, part] : parts_) {
    if (part.summed || part.arrived < workers_) continue;
    sumRange(offset, offset + part.len);
    optimizer_->update(params_.data(), summed_.data(), offset, offset + part.len,
                       StepInfo{pending_lr_, version_ + 1});
    part.summed = true;
  }
}

void ShardServer::applyPending() {
  // Every slice of the update, with its figures, whoever pushed it.
  for (size_t w = 0; w < arrived_.size(); ++w)
    if (!arrived_[w] || !figures_in_[w]) return;
  const auto n = static_cast<int64_t>(summed_.size());
  // What no part has covered yet: the whole slice without parts, else the
  // gaps between the parts summed and the parts not summed.
  std::vector<std::pair<int64_t, int64_t>> left;
  int64_t at = 0;
  for (const auto& [offset, part] : parts_) {
    if (offset > at) left.emplace_back(at, offset);
    if (!part.summed) left.emplace_back(offset, offset + part.len);
    at = std::max(at, offset + part.len);
  }
  if (at < n) left.emplace_back(at, n);
  for (const auto& [begin, end] : left) sumRange(begin, end);
  // fp16: a slice whose gradient overflowed spoils the update; every shard
  // sees every slice's figures, so all of them skip it (the parameters stay).
  int32_t overflows = 0;
  for (const ps::SliceFigures& f : figures_) overflows += f.overflows;
  if (overflows > 0) left.clear();
  // Clipped by the global norm of the summed gradient, as one process clips
  // its gradient: every shard adds its part of the sum of squares.
  const double clip_norm = job_.train.grad_clip_norm;
  if (clip_norm > 0 && overflows == 0) {
    double sum_of_squares = dtrain::sumOfSquares(summed_.data(), 0, n);
    if (exchange_norms_) sum_of_squares = exchange_norms_(version_ + 1, sum_of_squares);
    dtrain::scale(summed_.data(), 0, n, clipScale(sum_of_squares, clip_norm));
    left = {{0, n}};
  }
  for (const auto& [begin, end] : left)
    optimizer_->update(params_.data(), summed_.data(), begin, end, StepInfo{pending_lr_, version_ + 1});
  if (applied_log_) {
    const double now_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    for (size_t w = 0; w < pending_.size(); ++w)  // update u is global batch u - 1
      std::fprintf(applied_log_, "%d %lld %zu %.6f\n", pusher_[w], static_cast<long long>(version_), w,
                   now_s);
    std::fflush(applied_log_);
  }
  ++version_;
  stats_.record(0);
  parts_.clear();
  answered_figures_ = ps::SliceFigures{};
  for (size_t w = 0; w < pending_.size(); ++w) answered_figures_ += figures_[w];
  for (size_t w = 0; w < pending_.size(); ++w) {
    parts_seen_[w].clear();
    floats_in_[w] = 0;
    arrived_[w] = false;
    figures_in_[w] = false;
    if (lost_[w] || !awaiting_[w]) continue;
    awaiting_[w] = false;
    clocks_[w] = version_;
    replyParams(reply_to_[w], static_cast<int>(w), version_, 0, true);
  }
}

void ShardServer::replyParams(const std::string& routing, int worker, int64_t update, int64_t staleness,
                              bool first) {
  ps::Header h{ps::Kind::Params, worker, shard_, update, 0.0, generation_, 0};
  h.version = version_;
  h.staleness = staleness;
  h.live = live_;
  if (consistency_ == "sync") h.figures = answered_figures_;
  const double served_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  h.rate = served_s > 0 ? static_cast<double>(requests_) / served_s : 0.0;
  ShardMemory* memory = memoryOf(worker);
  const bool written = answer_written_[static_cast<size_t>(worker)];
  answer_written_[static_cast<size_t>(worker)] = false;
  if (first && memory) {
    if (!written)
      ShardMemory::streamInto(memory->params(), params_.data(), static_cast<int64_t>(params_.size()));
    h.shared = true;
    ps::send(socket_, h, {}, &routing);
    return;
  }
  ps::send(socket_, h, {{params_.data(), static_cast<int64_t>(params_.size())}}, &routing);
}

std::string ShardServer::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "parameter server: shard %d: %lld updates applied (%s), staleness max %lld mean %.2f, "
                "clock gap max %lld",
                shard_, static_cast<long long>(stats_.applied), consistency_.c_str(),
                static_cast<long long>(stats_.max_staleness), stats_.meanStaleness(),
                static_cast<long long>(stats_.max_clock_gap));
  std::string line = buf;
  if (consistency_ == "bounded") line += " (bound " + std::to_string(staleness_bound_) + ")";
  return line;
}

}  // namespace dtrain
