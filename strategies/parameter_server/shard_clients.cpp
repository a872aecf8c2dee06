#include "strategies/parameter_server/shard_clients.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/comm/rendezvous_socket.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// A shard's Failure answer: it refused the request (as opposed to not
// answering, or answering with something malformed).
class ShardRefusal : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace

ShardClients::ShardClients(const std::vector<std::string>& endpoints, const ShardPlacement& placement,
                           int worker, uint64_t generation, double timeout_s)
    : placement_(placement),
      worker_(worker),
      generation_(generation),
      timeout_ms_(static_cast<int>(std::max(1.0, timeout_s * 1000.0))),
      context_(1),
      endpoints_(endpoints) {
  if (static_cast<int>(endpoints.size()) != placement.shards)
    throw Error("parameter server: " + std::to_string(endpoints.size()) +
                " shard endpoints for a placement over " + std::to_string(placement.shards) + " shards");
  for (int s = 0; s < placement.shards; ++s) {
    ranges_.push_back(placement.rangesOf(s));
    versions_.push_back(0);
    pushed_.push_back(nullptr);
    own_copy_.emplace_back();
    last_step_.emplace_back();
    scratch_.emplace_back(static_cast<size_t>(placement.shard_floats[static_cast<size_t>(s)]));
    memory_.emplace_back();
    sockets_.emplace_back(context_, zmq::socket_type::dealer);
    sockets_.back().set(zmq::sockopt::linger, 0);
    try {
      sockets_.back().connect(endpoints[static_cast<size_t>(s)]);
    } catch (const zmq::error_t& e) {
      throw CommError("parameter-server shard " + std::to_string(s) + "'s address '" +
                      endpoints[static_cast<size_t>(s)] +
                      "' (from the rendezvous) cannot be reached: " + e.what());
    }
    if (endpoints[static_cast<size_t>(s)].rfind("ipc://", 0) == 0) attachMemory(s);
  }
}

ShardClients::~ShardClients() = default;

void ShardClients::attachMemory(int shard) {
  const auto s = static_cast<size_t>(shard);
  std::unique_ptr<ShardMemory> memory;
  try {
    memory = ShardMemory::create(placement_.shard_floats[s]);
  } catch (const Error&) {
    return;  // the system gives none: frames do
  }
  ps::Header h = header(ps::Kind::Attach, shard, 0);
  h.offset = memory->floats();
  h.region_pid = static_cast<int32_t>(::getpid());
  h.region_fd = memory->fd();
  ps::send(sockets_[s], h, {});
  // Refused (the shard cannot open it: another process namespace, say): frames do.
  try {
    await(shard, ps::Kind::Ack, "this worker's shared memory");
  } catch (const ShardRefusal&) {
    return;
  }
  memory_[s] = std::move(memory);
}

int ShardClients::sharedShards() const {
  int n = 0;
  for (const auto& m : memory_) n += m ? 1 : 0;
  return n;
}

ps::Header ShardClients::header(ps::Kind kind, int shard, int64_t update, double lr) const {
  ps::Header h{kind, worker_, shard, update, lr, generation_, 0};
  h.version = versions_[static_cast<size_t>(shard)];  // the parameters this worker holds
  return h;
}

ps::Header ShardClients::pushHeader(int shard, int64_t update, double lr, int64_t batch, int slice,
                                    const ps::SliceFigures& figures) const {
  ps::Header h = header(ps::Kind::Push, shard, update, lr);
  h.batch = batch;
  h.slice = slice;
  h.figures = figures;
  return h;
}

const float* ShardClients::slice(int shard, const float* flat) {
  const std::vector<PlacedRange>& ranges = ranges_[static_cast<size_t>(shard)];
  if (ranges.size() == 1) return flat + ranges[0].begin;  // contiguous: sent from where it is
  float* out = scratch_[static_cast<size_t>(shard)].data();
  for (const PlacedRange& r : ranges) {
    std::memcpy(out, flat + r.begin, static_cast<size_t>(r.end - r.begin) * sizeof(float));
    out += r.end - r.begin;
  }
  return scratch_[static_cast<size_t>(shard)].data();
}

void ShardClients::unslice(int shard, const float* from, float* flat) const {
  const float* in = from;
  for (const PlacedRange& r : ranges_[static_cast<size_t>(shard)]) {
    std::memcpy(flat + r.begin, in, static_cast<size_t>(r.end - r.begin) * sizeof(float));
    in += r.end - r.begin;
  }
}

ps::Message ShardClients::await(int shard, ps::Kind kind, const std::string& what) {
  std::optional<ps::Message> m = tryAwait(shard, kind, what, timeout_ms_);
  if (!m)
    throw CommError("parameter-server shard " + std::to_string(shard) + " (" +
                    endpoints_[static_cast<size_t>(shard)] + ") did not answer " + what + " within " +
                    std::to_string(timeout_ms_ / 1000) + " s; is it alive? ([cluster] collective_timeout_s)");
  return std::move(*m);
}

std::optional<ps::Message> ShardClients::tryAwait(int shard, ps::Kind kind, const std::string& what,
                                                  int wait_ms) {
  const std::string peer =
      "parameter-server shard " + std::to_string(shard) + " (" + endpoints_[static_cast<size_t>(shard)] + ")";
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(wait_ms);
  ps::Message m;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (!ps::receive(sockets_[static_cast<size_t>(shard)], m, static_cast<int>(std::max<int64_t>(0, left)),
                     peer))
      return std::nullopt;
    // A second answer to a push sent twice may still come: not what is awaited now.
    if (kind != ps::Kind::Params && m.header.kind == ps::Kind::Params) continue;
    break;
  }
  if (m.header.kind == ps::Kind::Failure) throw ShardRefusal(peer + " refused " + what + ": " + m.text);
  if (m.header.kind != kind || m.header.generation != generation_)
    throw CommError(peer + " answered " + what + " with a " + ps::kindName(m.header.kind) +
                    " of generation " + std::to_string(m.header.generation));
  const auto expected = static_cast<size_t>(placement_.shard_floats[static_cast<size_t>(shard)]);
  for (const ps::FloatFrame& frame : m.payload)
    if (frame.size() != expected)
      throw CommError(peer + " answered " + what + " with " + std::to_string(frame.size()) +
                      " floats for its " + std::to_string(expected));
  return m;
}

void ShardClients::init(const float* params, const std::vector<const float*>& state, const float* decay_flags,
                        int64_t updates_done) {
  // The parameters, the optimizer's state, the decay's flags.
  std::vector<const float*> buffers = {params};
  buffers.insert(buffers.end(), state.begin(), state.end());
  buffers.push_back(decay_flags);
  for (int s = 0; s < shards(); ++s) {
    // Slices of every buffer, kept until sent (the scratch holds one at a time).
    std::vector<std::vector<float>> slices;
    const size_t n = scratch_[static_cast<size_t>(s)].size();
    for (const float* buffer : buffers) {
      const float* b = slice(s, buffer);
      slices.emplace_back(b, b + n);
    }
    std::vector<std::pair<const float*, int64_t>> frames;
    for (const auto& v : slices) frames.emplace_back(v.data(), static_cast<int64_t>(v.size()));
    ps::send(sockets_[static_cast<size_t>(s)], header(ps::Kind::Init, s, updates_done), frames);
  }
  for (int s = 0; s < shards(); ++s) await(s, ps::Kind::Ack, "the chief's init");
  // Every worker starts from the chief's parameters, which are the shards' version `updates_done`.
}

void ShardClients::push(int64_t update, double lr, const float* grads, int64_t batch, int of_worker,
                        const ps::SliceFigures& figures) {
  pushSlices(update, lr, grads, batch, of_worker, figures, nullptr);
}

float* ShardClients::streamOut(int shard, const float* flat, float* clearing) {
  float* const start = memory_[static_cast<size_t>(shard)]->grads();
  float* out = start;
  constexpr int64_t kChunk = 4096;  // read once: streamed out, then zeroed in L1
  for (const PlacedRange& r : ranges_[static_cast<size_t>(shard)])
    for (int64_t c = r.begin; c < r.end; c += kChunk) {
      const int64_t len = std::min(r.end - c, kChunk);
      ShardMemory::streamInto(out, flat + c, len);
      if (clearing) std::memset(clearing + c, 0, static_cast<size_t>(len) * sizeof(float));
      out += len;
    }
  return start;
}

void ShardClients::pushSlices(int64_t update, double lr, const float* grads, int64_t batch, int of_worker,
                              const ps::SliceFigures& figures, float* clearing) {
  const bool own = of_worker < 0 || of_worker == worker_;
  if (own) {
    push_batch_ = batch;
    push_slice_ = of_worker;
    push_figures_ = figures;
    in_place_.clear();
  } else {
    keepOwnPush();  // its slices may be in scratch_, which this push overwrites
    in_place_.push_back(PushInPlace{batch, of_worker, figures, {}});
  }
  for (int s = 0; s < shards(); ++s) {
    const auto n = placement_.shard_floats[static_cast<size_t>(s)];
    ShardMemory* memory = memory_[static_cast<size_t>(s)].get();
    if (own && memory) {
      // The shard reads it from the shared memory, which holds it (for a
      // repeat, sent as frames) until the answer comes.
      pushed_[static_cast<size_t>(s)] = streamOut(s, grads, clearing);
      ps::Header h = pushHeader(s, update, lr, batch, of_worker, figures);
      h.shared = true;
      ps::send(sockets_[static_cast<size_t>(s)], h, {});
      continue;
    }
    const float* data = slice(s, grads);
    if (own) {
      pushed_[static_cast<size_t>(s)] = data;  // kept for a repeat while `grads` stays
    } else {
      in_place_.back().per_shard.emplace_back(data, data + n);
      data = in_place_.back().per_shard.back().data();
    }
    ps::send(sockets_[static_cast<size_t>(s)], pushHeader(s, update, lr, batch, of_worker, figures),
             {{data, n}});
  }
}

void ShardClients::pushAndPull(int64_t update, double lr, const float* grads, float* params, int64_t batch,
                               int of_worker) {
  push(update, lr, grads, batch, of_worker);
  pull(update, lr, params);
}

void ShardClients::pushAndPullClearing(int64_t update, double lr, float* grads, float* params, int64_t batch,
                                       int of_worker) {
  const bool own = of_worker < 0 || of_worker == worker_;
  pushSlices(update, lr, grads, batch, of_worker, {}, own ? grads : nullptr);
  pull(update, lr, params);
  // The slices sent from `grads` itself (kept there for a repeat until now), or copied from it.
  for (int s = 0; s < shards(); ++s) {
    if (own && memory_[static_cast<size_t>(s)]) continue;
    for (const PlacedRange& r : ranges_[static_cast<size_t>(s)])
      std::memset(grads + r.begin, 0, static_cast<size_t>(r.end - r.begin) * sizeof(float));
  }
}

void ShardClients::keepOwnPush() {
  for (int s = 0; s < shards(); ++s) {
    const auto i = static_cast<size_t>(s);
    if (!pushed_[i] || pushed_[i] == own_copy_[i].data()) continue;
    own_copy_[i].assign(pushed_[i], pushed_[i] + placement_.shard_floats[i]);
    pushed_[i] = own_copy_[i].data();
  }
}

void ShardClients::pushPart(int64_t update, double lr, const float* grads, int64_t begin, int64_t end) {
  for (int s = 0; s < shards(); ++s) {
    int64_t offset = 0;  // of the range in the shard's slice
    for (const PlacedRange& r : ranges_[static_cast<size_t>(s)]) {
      const int64_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
      if (lo < hi) {
        ps::Header h = header(ps::Kind::PushPart, s, update, lr);
        h.offset = offset + (lo - r.begin);
        if (ShardMemory* memory = memory_[static_cast<size_t>(s)].get()) {
          ShardMemory::streamInto(memory->grads() + h.offset, grads + lo, hi - lo);
          h.shared = true;
          h.count = hi - lo;
          ps::send(sockets_[static_cast<size_t>(s)], h, {});
        } else {
          ps::send(sockets_[static_cast<size_t>(s)], h, {{grads + lo, hi - lo}});
        }
      }
      offset += r.end - r.begin;
    }
  }
}

void ShardClients::finishParts(int64_t update, double lr, const float* grads,
                               const ps::SliceFigures& figures) {
  push_batch_ = -1;
  push_slice_ = -1;
  push_figures_ = figures;
  in_place_.clear();
  for (int s = 0; s < shards(); ++s) {
    // Sent again whole if no answer comes.
    pushed_[static_cast<size_t>(s)] = slice(s, grads);
    ps::Header h = header(ps::Kind::Figures, s, update, lr);
    h.figures = figures;
    ps::send(sockets_[static_cast<size_t>(s)], h, {});
  }
}

void ShardClients::pull(int64_t update, double lr, float* params,
                        const std::function<bool()>& while_waiting) {
  const std::string what = "update " + std::to_string(update);
  // Taken in only once every shard has answered: a worker computing a lost
  // worker's slice meanwhile needs the parameters the update is of.
  std::vector<ps::Message> answers;
  for (int s = 0; s < shards(); ++s) answers.push_back(awaitParams(s, update, lr, what, while_waiting));
  answered_figures_ = answers[0].header.figures;  // every shard sums the same
  for (int s = 0; s < shards(); ++s) {
    const ps::Message& m = answers[static_cast<size_t>(s)];
    unslice(s, m.header.shared ? memory_[static_cast<size_t>(s)]->params() : m.payload[0].data(), params);
    versions_[static_cast<size_t>(s)] = m.header.version;
    max_staleness_ = std::max(max_staleness_, m.header.staleness);
    // A shard that has seen a worker lost says so first.
    if (m.header.live > 0) live_ = std::min(live_, static_cast<int>(m.header.live));
    const int64_t floats = placement_.shard_floats[static_cast<size_t>(s)];
    last_step_[static_cast<size_t>(s)] =
        ShardStep{m.header.staleness, m.header.rate, 2 * floats * static_cast<int64_t>(sizeof(float))};
  }
}

ps::Message ShardClients::awaitParams(int shard, int64_t update, double lr, const std::string& what,
                                      const std::function<bool()>& while_waiting) {
  // A push or its answer may be lost on the way: the push is sent again,
  // less and less often, until the answer comes or the deadline passes. The
  // shard applies each (worker, update) once and answers a repeat again, so
  // a repeat is harmless; answers to earlier repeats are dropped here.
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  int resend_ms = kFirstResendMs;
  Clock::time_point resend_at = Clock::now() + std::chrono::milliseconds(resend_ms);
  for (;;) {
    const auto until = std::min(deadline, resend_at);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    int wait_ms = static_cast<int>(std::max<int64_t>(0, left));
    if (while_waiting) wait_ms = std::min(wait_ms, kWaitingCallMs);
    std::optional<ps::Message> m = tryAwait(shard, ps::Kind::Params, what, wait_ms);
    if (m) {
      if (m->header.update < update) continue;  // the answer to an earlier repeat
      if (m->header.shared && (!memory_[static_cast<size_t>(shard)] || !m->payload.empty()))
        throw CommError("parameter-server shard " + std::to_string(shard) + " answered " + what +
                        " through shared memory this worker did not give it");
      if (m->payload.size() != (m->header.shared ? 0u : 1u) || m->header.update != update)
        throw CommError("parameter-server shard " + std::to_string(shard) + " answered " + what +
                        " with the parameters of update " + std::to_string(m->header.update));
      return std::move(*m);
    }
    if (while_waiting && while_waiting()) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    if (Clock::now() >= deadline)
      throw CommError("parameter-server shard " + std::to_string(shard) + " (" +
                      endpoints_[static_cast<size_t>(shard)] + ") did not answer " + what + " within " +
                      std::to_string(timeout_ms_ / 1000) +
                      " s; is it alive? ([cluster] collective_timeout_s)");
    if (Clock::now() < resend_at) continue;
    resend(shard, update, lr);
    ++resends_;
    resend_ms = std::min(resend_ms * 2, kLastResendMs);
    resend_at = Clock::now() + std::chrono::milliseconds(resend_ms);
  }
}

void ShardClients::resend(int shard, int64_t update, double lr) {
  const auto s = static_cast<size_t>(shard);
  const int64_t n = placement_.shard_floats[s];
  ps::send(sockets_[s], pushHeader(shard, update, lr, push_batch_, push_slice_, push_figures_),
           {{pushed_[s], n}});
  for (const PushInPlace& p : in_place_)
    ps::send(sockets_[s], pushHeader(shard, update, lr, p.batch, p.slice, p.figures),
             {{p.per_shard[s].data(), n}});
}

void ShardClients::gather(float* params, const std::vector<float*>& state) {
  for (int s = 0; s < shards(); ++s)
    ps::send(sockets_[static_cast<size_t>(s)], header(ps::Kind::Gather, s, 0), {});
  for (int s = 0; s < shards(); ++s) {
    const ps::Message m = await(s, ps::Kind::State, "the chief's gather for a checkpoint");
    if (m.payload.size() != state.size() + 1)
      throw CommError("parameter-server shard " + std::to_string(s) + " holds " +
                      std::to_string(m.payload.size() - 1) + " optimizer state buffers, the chief " +
                      std::to_string(state.size()));
    unslice(s, m.payload[0].data(), params);
    for (size_t i = 0; i < state.size(); ++i) unslice(s, m.payload[i + 1].data(), state[i]);
  }
}

void ShardClients::stop() {
  for (int s = 0; s < shards(); ++s)
    ps::send(sockets_[static_cast<size_t>(s)], header(ps::Kind::Stop, s, 0), {});
  for (int s = 0; s < shards(); ++s) await(s, ps::Kind::Ack, "the chief's stop");
}

}  // namespace dtrain
