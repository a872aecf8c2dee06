#include "strategies/parameter_server/ps_wire.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "core/errors.h"

namespace dtrain::ps {

namespace {

constexpr uint32_t kMagic = 0x31535044;  // "DPS1"
constexpr uint16_t kVersion = 6;

// The header as it travels: fixed layout, little-endian hosts only (x86-64
// and aarch64 Linux, what dtrain builds for).
struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;
  uint8_t shared;
  int32_t worker;
  int32_t shard;
  int64_t update;
  double lr;
  uint64_t generation;
  int32_t frames;
  int32_t slice;
  int64_t version_sent;  // Header::version
  int64_t staleness;
  double rate;
  int64_t batch;
  int32_t live;
  int32_t stop;
  int64_t offset;
  double loss_sum;
  double correct;
  double samples;
  int32_t overflows;
  int32_t region_fd;
  int32_t region_pid;
  int32_t unused_tail;
  int64_t count;
};
static_assert(sizeof(WireHeader) == 144, "the wire header has a fixed size");

bool knownKind(uint8_t k) { return k >= 1 && k <= 11; }

WireHeader wireHeaderOf(const Header& h, int32_t frames) {
  WireHeader w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.kind = static_cast<uint8_t>(h.kind);
  w.worker = h.worker;
  w.shard = h.shard;
  w.update = h.update;
  w.lr = h.lr;
  w.generation = h.generation;
  w.frames = frames;
  w.version_sent = h.version;
  w.staleness = h.staleness;
  w.rate = h.rate;
  w.batch = h.batch;
  w.slice = h.slice;
  w.live = h.live;
  w.offset = h.offset;
  w.stop = h.figures.stop;
  w.loss_sum = h.figures.loss_sum;
  w.correct = h.figures.correct;
  w.samples = h.figures.samples;
  w.overflows = h.figures.overflows;
  w.shared = h.shared ? 1 : 0;
  w.region_pid = h.region_pid;
  w.region_fd = h.region_fd;
  w.count = h.count;
  return w;
}

}  // namespace

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::Init:
      return "init";
    case Kind::Ack:
      return "ack";
    case Kind::Push:
      return "push";
    case Kind::Params:
      return "params";
    case Kind::Gather:
      return "gather";
    case Kind::State:
      return "state";
    case Kind::Stop:
      return "stop";
    case Kind::Failure:
      return "failure";
    case Kind::PushPart:
      return "push part";
    case Kind::Figures:
      return "figures";
    case Kind::Attach:
      return "attach";
  }
  return "?";
}

namespace {

// Fault injection for tests (DTRAIN_TEST_PS_FAULTS="drop=P,dup=P,delay_ms=N"):
// pushes and their answers are dropped, sent twice or held back at random,
// so the tests see each push applied exactly once all the same.
struct Faults {
  double drop = 0, dup = 0;
  int delay_ms = 0;
  std::mt19937 rng;
  bool on = false;
};

Faults& faults() {
  static Faults f = [] {
    Faults out;
    const char* text = std::getenv("DTRAIN_TEST_PS_FAULTS");
    if (!text) return out;
    std::sscanf(text, "drop=%lf,dup=%lf,delay_ms=%d", &out.drop, &out.dup, &out.delay_ms);
    out.rng.seed(static_cast<unsigned>(::getpid()));
    out.on = true;
    return out;
  }();
  return f;
}

Header headerOf(const WireHeader& w) {
  Header h;
  h.kind = static_cast<Kind>(w.kind);
  h.worker = w.worker;
  h.shard = w.shard;
  h.update = w.update;
  h.lr = w.lr;
  h.generation = w.generation;
  h.frames = w.frames;
  h.version = w.version_sent;
  h.staleness = w.staleness;
  h.rate = w.rate;
  h.batch = w.batch;
  h.slice = w.slice;
  h.live = w.live;
  h.offset = w.offset;
  h.figures = SliceFigures{w.loss_sum, w.correct, w.samples, w.stop, w.overflows};
  h.shared = w.shared != 0;
  h.region_pid = w.region_pid;
  h.region_fd = w.region_fd;
  h.count = w.count;
  return h;
}

void sendOnce(zmq::socket_t& socket, const WireHeader& w,
              const std::vector<std::pair<const float*, int64_t>>& frames, const std::string* routing) {
  if (routing) socket.send(zmq::buffer(*routing), zmq::send_flags::sndmore);
  socket.send(zmq::buffer(&w, sizeof w), frames.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto flags = i + 1 == frames.size() ? zmq::send_flags::none : zmq::send_flags::sndmore;
    socket.send(zmq::buffer(frames[i].first, static_cast<size_t>(frames[i].second) * sizeof(float)), flags);
  }
}

}  // namespace

void send(zmq::socket_t& socket, const Header& h, const std::vector<std::pair<const float*, int64_t>>& frames,
          const std::string* routing) {
  const WireHeader w = wireHeaderOf(h, static_cast<int32_t>(frames.size()));
  Faults& f = faults();
  if (f.on && (h.kind == Kind::Push || h.kind == Kind::Params || h.kind == Kind::Figures)) {
    std::uniform_real_distribution<double> chance(0.0, 1.0);
    if (f.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.rng() % (f.delay_ms + 1)));
    if (chance(f.rng) < f.drop) return;
    if (chance(f.rng) < f.dup) sendOnce(socket, w, frames, routing);
  }
  sendOnce(socket, w, frames, routing);
}

void sendFailure(zmq::socket_t& socket, Header header, const std::string& reason,
                 const std::string* routing) {
  header.kind = Kind::Failure;
  WireHeader w = wireHeaderOf(header, 1);
  if (routing) socket.send(zmq::buffer(*routing), zmq::send_flags::sndmore);
  socket.send(zmq::buffer(&w, sizeof w), zmq::send_flags::sndmore);
  socket.send(zmq::buffer(reason), zmq::send_flags::none);
}

bool receive(zmq::socket_t& socket, Message& out, int timeout_ms, const std::string& peer,
             std::string* routing) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return false;
  std::vector<zmq::message_t> parts;
  for (;;) {
    zmq::message_t part;
    if (!socket.recv(part, zmq::recv_flags::none)) return false;
    const bool more = part.more();
    parts.push_back(std::move(part));
    if (!more) break;
  }
  size_t first = 0;
  if (routing) {
    if (parts.size() < 2)
      throw CommError(peer + ": a parameter-server message without routing and header frames");
    *routing = parts[0].to_string();
    first = 1;
  }
  const zmq::message_t& head = parts[first];
  if (head.size() != sizeof(WireHeader))
    throw CommError(peer + ": a parameter-server message with a header of " + std::to_string(head.size()) +
                    " bytes (expected " + std::to_string(sizeof(WireHeader)) +
                    "); is something else on this port?");
  WireHeader w;
  std::memcpy(&w, head.data(), sizeof w);
  if (w.magic != kMagic)
    throw CommError(peer +
                    ": not a dtrain parameter-server message (bad magic); is something else on this port?");
  if (w.version != kVersion)
    throw CommError(peer + ": parameter-server message version " + std::to_string(w.version) +
                    " (this dtrain speaks " + std::to_string(kVersion) +
                    "); run the same dtrain build everywhere");
  if (!knownKind(w.kind))
    throw CommError(peer + ": unknown parameter-server message kind " + std::to_string(w.kind));
  const size_t payload_frames = parts.size() - first - 1;
  if (w.frames < 0 || static_cast<size_t>(w.frames) != payload_frames)
    throw CommError(peer + ": a parameter-server " + kindName(static_cast<Kind>(w.kind)) +
                    " message announces " + std::to_string(w.frames) + " payload frames and carries " +
                    std::to_string(payload_frames));
  out = Message{};
  out.header = headerOf(w);
  if (out.header.kind == Kind::Failure) {
    out.text = payload_frames > 0 ? parts[first + 1].to_string() : std::string("(no reason given)");
    return true;
  }
  for (size_t i = first + 1; i < parts.size(); ++i) {
    if (parts[i].size() % sizeof(float) != 0)
      throw CommError(peer + ": a parameter-server payload frame of " + std::to_string(parts[i].size()) +
                      " bytes is not whole floats");
    out.payload.emplace_back(std::move(parts[i]));
  }
  return true;
}

}  // namespace dtrain::ps
