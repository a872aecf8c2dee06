// The messages between parameter-server workers and shards, over ZeroMQ
// (ROUTER on the shard, DEALER on each worker): a fixed-size header frame,
// then zero or more payload frames of floats. Every received message is
// checked (magic, version, kind, frame sizes against the header's counts),
// so garbage on a shard's port is refused with a message, never trusted.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

namespace dtrain::ps {

enum class Kind : uint8_t {
  Init = 1,     // chief -> shard: parameters, then the optimizer's state buffers; update = steps done
  Ack = 2,      // shard -> chief: Init or Stop taken
  Push = 3,     // worker -> shard: the worker's gradient of update `update`, for the shard's ranges
  Params = 4,   // shard -> worker: the parameters that answer the worker's push of `update`
  Gather = 5,   // chief -> shard: send everything for a checkpoint
  State = 6,    // shard -> chief: parameters, then the optimizer's state buffers
  Stop = 7,     // chief -> shard: the run is over
  Failure = 8,  // shard -> worker: the request was refused; one payload frame of text
  // worker -> shard (sync): part of the worker's gradient of update `update`,
  // `offset` floats into the shard's slice, sent as backward produces it; the
  // worker then awaits Params as after a Push (and sends the whole Push again
  // when no answer comes)
  PushPart = 9,
  // worker -> shard (sync): the figures of the worker's slice of update
  // `update`, once its parts are sent (a whole Push carries them itself)
  Figures = 10,
  // worker -> shard on the same host: memory the worker shares with the
  // shard (shard_memory.h), its descriptor `region_fd` in process
  // `region_pid`, `offset` floats each way; answered with Ack, or Failure
  // when the shard cannot use it (the worker then sends frames)
  Attach = 11
};

// A sync push's figures of the samples it covers; a sync answer's, summed
// over every slice of the update (the step's figures, as every worker logs
// them), with `stop` a signal some worker was asked to stop by (else 0), so
// that every worker stops after the same step.
struct SliceFigures {
  double loss_sum = 0;
  double correct = 0;
  double samples = 0;
  int32_t stop = 0;
  // fp16: slices whose (unscaled) gradient holds an inf or a NaN; a shard
  // skips an update any slice overflowed in, and every worker's loss scale
  // backs off alike.
  int32_t overflows = 0;
  SliceFigures& operator+=(const SliceFigures& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    samples += o.samples;
    stop = stop ? stop : o.stop;
    overflows += o.overflows;
    return *this;
  }
};

struct Header {
  Kind kind = Kind::Ack;
  int32_t worker = 0;       // the sender's worker rank (to a worker: the addressee's)
  int32_t shard = 0;        // the shard addressed or answering
  int64_t update = 0;       // 1-based update number (Init: updates done)
  double lr = 0;            // Push: the scheduled learning rate of the update
  uint64_t generation = 0;  // the run's rendezvous generation: a message of another one is refused
  int32_t frames = 0;       // payload frames that follow
  // Push: the parameter version the gradient was computed on; Params: the
  // version sent, and in `staleness` how many updates the push came late by.
  int64_t version = 0;
  int64_t staleness = 0;
  double rate = 0;  // Params: the requests per second the shard has served so far
  // Push: which samples the gradient is of: worker `slice`'s slice of global
  // batch `batch` (0-based, counted over the epochs), so that a lost
  // worker's remaining slices can be handed to the others.
  int64_t batch = -1;
  int32_t slice = -1;
  int32_t live = 0;        // Params: the workers not lost
  int64_t offset = 0;      // PushPart: where its floats go in the shard's slice
  SliceFigures figures{};  // sync Push, Figures, Params (see SliceFigures)
  // Push, PushPart, Params: the floats are in the memory the worker shares
  // with the shard (Attach), not in a payload frame; a PushPart's are
  // `count` floats at `offset` of its gradients.
  bool shared = false;
  int64_t count = 0;
  int32_t region_pid = 0;  // Attach
  int32_t region_fd = -1;  // Attach
};

// A payload frame as it arrived: its floats are read in place, not copied
// (ZeroMQ's buffer of a frame this large is malloc'd, so float-aligned).
class FloatFrame {
 public:
  explicit FloatFrame(zmq::message_t message) : message_(std::move(message)) {}
  size_t size() const { return message_.size() / sizeof(float); }
  const float* data() const { return static_cast<const float*>(message_.data()); }
  std::vector<float> toVector() const { return std::vector<float>(data(), data() + size()); }
  bool operator==(const std::vector<float>& v) const { return toVector() == v; }

 private:
  zmq::message_t message_;
};

// One message: its header and payload frames (each a float array).
struct Message {
  Header header;
  std::vector<FloatFrame> payload;
  std::string text;  // Failure's reason
};

// Sends header + `frames` (pointers to n floats each). `routing` (ROUTER side) is the peer's id frame.
void send(zmq::socket_t& socket, const Header& header,
          const std::vector<std::pair<const float*, int64_t>>& frames, const std::string* routing = nullptr);
void sendFailure(zmq::socket_t& socket, Header header, const std::string& reason, const std::string* routing);
// Receives one message (ROUTER side: `routing` gets the sender's id). Returns
// false when nothing arrived within `timeout_ms`. Throws CommError naming
// `peer` for a malformed message.
bool receive(zmq::socket_t& socket, Message& out, int timeout_ms, const std::string& peer,
             std::string* routing = nullptr);

const char* kindName(Kind kind);

}  // namespace dtrain::ps
