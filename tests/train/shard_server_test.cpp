// A parameter-server shard in this process, spoken to over ZeroMQ as a
// worker speaks to it: what each consistency applies and when it answers, a
// push applied exactly once however often it comes, a learning rate scaled
// by staleness, pushes and answers through memory shared with a worker on
// the shard's host, and refusals (another run's generation, garbage on the
// port, memory it cannot trust) that leave the shard serving. Plain SGD with lr 1 makes every update
// readable in the parameters: p -= lr * g.
#include "strategies/parameter_server/shard_server.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/config/job_config.h"
#include "strategies/parameter_server/ps_wire.h"
#include "strategies/parameter_server/shard_memory.h"

using namespace dtrain;

namespace {

constexpr uint64_t kGeneration = 7;

JobConfig sgdJob(const std::string& consistency, int staleness = 2, bool scale_lr = false) {
  JobConfig job;
  job.optimizer.type = "sgd";
  job.optimizer.momentum = 0.0;
  job.strategy.consistency = consistency;
  job.strategy.staleness = staleness;
  job.strategy.scale_lr_by_staleness = scale_lr;
  return job;
}

// A shard serving on its own thread, and one DEALER socket per worker.
struct Harness {
  JobConfig job;
  ShardServer server;
  std::thread thread;
  zmq::context_t context{1};
  std::vector<zmq::socket_t> workers;

  Harness(JobConfig j, int n_workers, LossWatch watch = {})
      : job(std::move(j)), server(job, 0, n_workers, kGeneration, "127.0.0.1") {
    server.watchLosses(std::move(watch));
    thread = std::thread([this] { server.serve(30.0); });
    for (int w = 0; w < n_workers; ++w) {
      workers.emplace_back(context, zmq::socket_type::dealer);
      workers.back().set(zmq::sockopt::linger, 0);
      workers.back().connect(server.endpoint());
    }
  }
  ~Harness() {
    ps::send(workers[0], header(ps::Kind::Stop, 0, 0), {});
    ps::Message m;
    ps::receive(workers[0], m, 5000, "test");
    thread.join();
  }
  static ps::Header header(ps::Kind kind, int worker, int64_t update, int64_t version = 0, double lr = 1.0) {
    ps::Header h{kind, worker, 0, update, lr, kGeneration, 0};
    h.version = version;
    return h;
  }
  void init(const std::vector<float>& params) {
    ps::send(workers[0], header(ps::Kind::Init, 0, 0),
             {{params.data(), static_cast<int64_t>(params.size())}});
    ps::Message m;
    REQUIRE(ps::receive(workers[0], m, 5000, "test"));
    REQUIRE(m.header.kind == ps::Kind::Ack);
  }
  void push(int w, int64_t update, const std::vector<float>& g, int64_t version = 0) {
    ps::send(workers[static_cast<size_t>(w)], header(ps::Kind::Push, w, update, version),
             {{g.data(), static_cast<int64_t>(g.size())}});
  }
  // Worker w's sync push of `update` for slice `slice` (its own, or a lost worker's), with its figures.
  void pushSlice(int w, int slice, int64_t update, const std::vector<float>& g, ps::SliceFigures f) {
    ps::Header h = header(ps::Kind::Push, w, update);
    h.batch = update - 1;
    h.slice = slice;
    h.figures = f;
    ps::send(workers[static_cast<size_t>(w)], h, {{g.data(), static_cast<int64_t>(g.size())}});
  }
  // Part of worker w's sync push of `update`: floats [offset, offset + g.size()).
  void pushPart(int w, int64_t update, int64_t offset, const std::vector<float>& g) {
    ps::Header part = header(ps::Kind::PushPart, w, update);
    part.offset = offset;
    ps::send(workers[static_cast<size_t>(w)], part, {{g.data(), static_cast<int64_t>(g.size())}});
  }
  // Worker w's figures of its slice of `update`, once its parts are sent.
  void figures(int w, int64_t update, ps::SliceFigures f = {}) {
    ps::Header h = header(ps::Kind::Figures, w, update);
    h.figures = f;
    ps::send(workers[static_cast<size_t>(w)], h, {});
  }
  // Worker w hands the shard descriptor `fd` of process `pid`, `floats` floats each way; the answer.
  ps::Message attach(int w, int pid, int fd, int64_t floats) {
    ps::Header a = header(ps::Kind::Attach, w, 0);
    a.region_pid = pid;
    a.region_fd = fd;
    a.offset = floats;
    ps::send(workers[static_cast<size_t>(w)], a, {});
    return answer(w);
  }
  // Worker w's push of `update` through its shared memory, whose gradients it writes first.
  void pushShared(int w, ShardMemory& memory, int64_t update, const std::vector<float>& g,
                  int64_t version = 0) {
    std::copy(g.begin(), g.end(), memory.grads());
    ps::Header p = header(ps::Kind::Push, w, update, version);
    p.shared = true;
    ps::send(workers[static_cast<size_t>(w)], p, {});
  }
  // Part of worker w's sync push of `update` through its shared memory: floats [offset, offset + g.size()).
  void pushPartShared(int w, ShardMemory& memory, int64_t update, int64_t offset,
                      const std::vector<float>& g) {
    std::copy(g.begin(), g.end(), memory.grads() + offset);
    ps::Header part = header(ps::Kind::PushPart, w, update);
    part.offset = offset;
    part.shared = true;
    part.count = static_cast<int64_t>(g.size());
    ps::send(workers[static_cast<size_t>(w)], part, {});
  }
  // The next answer to worker w within `ms`, or a message of kind Ack with no payload when none came.
  ps::Message answer(int w, int ms = 2000) {
    ps::Message m;
    if (!ps::receive(workers[static_cast<size_t>(w)], m, ms, "test")) m.header.kind = ps::Kind::Ack;
    return m;
  }
};

}  // namespace

TEST_CASE("shard: sync applies update t once every worker's push of t is in, summed in worker order") {
  Harness h(sgdJob("sync"), 2);
  h.init({10.0f, 20.0f});
  h.push(1, 1, {1.0f, 2.0f});
  CHECK(h.answer(1, 200).header.kind == ps::Kind::Ack);  // nothing yet: worker 0 has not pushed
  h.push(0, 1, {0.5f, 0.25f});
  for (int w : {0, 1}) {
    const ps::Message m = h.answer(w);
    REQUIRE(m.header.kind == ps::Kind::Params);
    CHECK(m.header.update == 1);
    CHECK(m.payload[0] == std::vector<float>{8.5f, 17.75f});
  }
  // A repeated push of update 1 is answered again, not applied again.
  h.push(0, 1, {100.0f, 100.0f});
  const ps::Message again = h.answer(0);
  CHECK(again.payload[0] == std::vector<float>{8.5f, 17.75f});
  CHECK(h.server.version() == 1);
}

TEST_CASE("shard: sync pushes in parts, in any order, mixed with whole pushes, apply what whole pushes do") {
  Harness h(sgdJob("sync"), 2);
  h.init({10.0f, 20.0f, 30.0f, 40.0f});
  // Worker 0 sends its last layers first, as backward produces them; worker
  // 1 sends one part and then its push whole (as a repeat after a lost part).
  h.pushPart(0, 1, 2, {1.0f, 2.0f});
  h.pushPart(1, 1, 2, {3.0f, 4.0f});
  h.pushPart(1, 1, 2, {3.0f, 4.0f});                     // a repeated part counts once
  CHECK(h.answer(0, 200).header.kind == ps::Kind::Ack);  // not whole yet
  h.pushPart(0, 1, 0, {0.5f, 0.25f});
  h.figures(0, 1);
  CHECK(h.answer(0, 200).header.kind == ps::Kind::Ack);  // worker 1's first half is missing
  h.push(1, 1, {1.0f, 1.0f, 3.0f, 4.0f});
  for (int w : {0, 1}) {
    const ps::Message m = h.answer(w);
    REQUIRE(m.header.kind == ps::Kind::Params);
    CHECK(m.payload[0] == std::vector<float>{8.5f, 18.75f, 26.0f, 34.0f});
  }
  CHECK(h.server.version() == 1);
  // A late part of the applied update changes nothing; one outside the slice is refused.
  h.pushPart(0, 1, 0, {100.0f, 100.0f});
  h.pushPart(0, 2, 3, {1.0f, 1.0f});
  const ps::Message refused = h.answer(0);
  CHECK(refused.header.kind == ps::Kind::Failure);
  CHECK(refused.text.find("pushed floats [3, 5) of a slice of 4") != std::string::npos);
  h.push(0, 2, {0.0f, 0.0f, 0.0f, 0.0f});
  h.push(1, 2, {0.0f, 0.0f, 0.0f, 0.0f});
  CHECK(h.answer(0).payload[0] == std::vector<float>{8.5f, 18.75f, 26.0f, 34.0f});
}

TEST_CASE("shard: sync waits for a lost worker's slice, which a survivor pushes in its place") {
  std::atomic<bool> gone{false};
  LossWatch watch;
  watch.lost = [&gone] { return gone ? std::vector<int>{2} : std::vector<int>{}; };
  Harness h(sgdJob("sync"), 3, std::move(watch));
  h.init({10.0f, 20.0f});
  h.pushSlice(0, 0, 1, {1.0f, 1.0f}, {0.5, 1, 2, 0});
  h.pushPart(2, 1, 0, {3.0f});  // worker 2 sends part of its slice and is lost
  gone = true;
  h.pushSlice(1, 1, 1, {2.0f, 2.0f}, {0.25, 2, 2, 0});
  CHECK(h.answer(0, 400).header.kind == ps::Kind::Ack);  // the update waits for slice 2
  // Worker 1 computes slice 2 in worker 2's place (the same gradients as its part).
  h.pushSlice(1, 2, 1, {3.0f, 4.0f}, {0.125, 0, 2, SIGTERM});
  for (int w : {0, 1}) {
    const ps::Message m = h.answer(w);
    REQUIRE(m.header.kind == ps::Kind::Params);
    CHECK(m.payload[0] == std::vector<float>{4.0f, 13.0f});
    // The update's figures over its three slices, and the stop one of them carried.
    CHECK(m.header.figures.loss_sum == 0.875);
    CHECK(m.header.figures.correct == 3);
    CHECK(m.header.figures.samples == 6);
    CHECK(m.header.figures.stop == SIGTERM);
    CHECK(m.header.live == 2);
  }
  // Slice 2 pushed again by worker 0, which learnt of the loss late: applied already, nothing answers.
  h.pushSlice(0, 2, 1, {3.0f, 4.0f}, {});
  CHECK(h.answer(0, 300).header.kind == ps::Kind::Ack);
  CHECK(h.server.version() == 1);
  // The lost worker may not push any more.
  h.pushSlice(2, 2, 1, {3.0f, 4.0f}, {});
  const ps::Message refused = h.answer(2);
  CHECK(refused.header.kind == ps::Kind::Failure);
  CHECK(refused.text.find("worker 2 was lost") != std::string::npos);
}

TEST_CASE("shard: async applies each push at once and measures how late it came") {
  Harness h(sgdJob("async"), 2);
  h.init({0.0f});
  h.push(0, 1, {1.0f}, /*version=*/0);
  CHECK(h.answer(0).payload[0] == std::vector<float>{-1.0f});
  h.push(1, 1, {2.0f}, /*version=*/0);  // computed on version 0; one update came in between
  const ps::Message m = h.answer(1);
  CHECK(m.payload[0] == std::vector<float>{-3.0f});
  CHECK(m.header.staleness == 1);
  CHECK(m.header.version == 2);
  // A duplicate of worker 1's push is not applied twice.
  h.push(1, 1, {2.0f}, 0);
  CHECK(h.answer(1).payload[0] == std::vector<float>{-3.0f});
  CHECK(h.server.version() == 2);
}

TEST_CASE("shard: a push's learning rate is divided by 1 + its staleness when the job asks") {
  Harness h(sgdJob("async", 2, /*scale_lr=*/true), 2);
  h.init({0.0f});
  h.push(0, 1, {1.0f}, 0);
  CHECK(h.answer(0).payload[0] == std::vector<float>{-1.0f});
  h.push(1, 1, {4.0f}, 0);  // one update late: lr 1/2
  CHECK(h.answer(1).payload[0] == std::vector<float>{-3.0f});
}

TEST_CASE("shard: bounded staleness holds a worker that runs too far ahead until the slowest catches up") {
  Harness h(sgdJob("bounded", 1), 2);
  h.init({0.0f});
  h.push(0, 1, {1.0f}, 0);
  CHECK(h.answer(0).header.kind == ps::Kind::Params);  // 1 ahead of worker 1: within the bound
  h.push(0, 2, {1.0f}, 1);
  CHECK(h.answer(0, 300).header.kind == ps::Kind::Ack);  // 2 ahead: held
  h.push(1, 1, {1.0f}, 0);
  CHECK(h.answer(1).header.kind == ps::Kind::Params);
  const ps::Message released = h.answer(0);  // worker 1 reached 1: worker 0 at 2 may go on
  REQUIRE(released.header.kind == ps::Kind::Params);
  CHECK(released.header.update == 2);
  CHECK(released.payload[0] == std::vector<float>{-3.0f});
}

TEST_CASE("shard: another run's messages and garbage on the port are refused, and the shard serves on") {
  Harness h(sgdJob("sync"), 1);
  h.init({1.0f});
  ps::Header foreign = Harness::header(ps::Kind::Push, 0, 1);
  foreign.generation = kGeneration + 1;
  std::vector<float> g = {1.0f};
  ps::send(h.workers[0], foreign, {{g.data(), 1}});
  const ps::Message refused = h.answer(0);
  CHECK(refused.header.kind == ps::Kind::Failure);
  CHECK(refused.text.find("generation 8") != std::string::npos);
  h.workers[0].send(zmq::str_buffer("GET / HTTP/1.0\r\n\r\n"), zmq::send_flags::none);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(h.server.ignored() == 1);
  h.push(0, 1, {0.5f});
  CHECK(h.answer(0).payload[0] == std::vector<float>{0.5f});
}

TEST_CASE("shard: a push out of step is refused with the updates named") {
  Harness h(sgdJob("async"), 1);
  h.init({0.0f});
  h.push(0, 3, {1.0f});
  const ps::Message m = h.answer(0);
  CHECK(m.header.kind == ps::Kind::Failure);
  CHECK(m.text.find("pushed update 3 after its update 0") != std::string::npos);
}

TEST_CASE("shard: a worker on its host pushes through shared memory and is answered through it") {
  for (const std::string consistency : {"async", "sync"}) {
    CAPTURE(consistency);
    Harness h(sgdJob(consistency), 2);
    h.init({0.0f, 0.0f});
    std::unique_ptr<ShardMemory> memory = ShardMemory::create(2);
    REQUIRE(h.attach(0, ::getpid(), memory->fd(), 2).header.kind == ps::Kind::Ack);
    // Worker 0 through its memory, worker 1 (on another host) through frames.
    h.pushShared(0, *memory, 1, {1.0f, 2.0f});
    h.push(1, 1, {3.0f, 4.0f}, consistency == "async" ? 1 : 0);
    const ps::Message shared = h.answer(0);
    REQUIRE(shared.header.kind == ps::Kind::Params);
    CHECK(shared.header.shared);
    CHECK(shared.payload.empty());
    const ps::Message framed = h.answer(1);
    CHECK_FALSE(framed.header.shared);
    CHECK(framed.payload[0] == std::vector<float>{-4.0f, -6.0f});
    // Async answers worker 0 with the parameters of its push alone; sync with the sum.
    const std::vector<float> first =
        consistency == "async" ? std::vector<float>{-1.0f, -2.0f} : std::vector<float>{-4.0f, -6.0f};
    CHECK(std::vector<float>(memory->params(), memory->params() + 2) == first);
    // A repeat (sent as frames, as a worker repeats) is answered as a frame:
    // the shared parameters are written only while the worker waits for them.
    std::fill(memory->params(), memory->params() + 2, 99.0f);
    h.push(0, 1, {1.0f, 2.0f});
    const ps::Message repeat = h.answer(0);
    CHECK_FALSE(repeat.header.shared);
    CHECK(repeat.payload[0] == std::vector<float>{-4.0f, -6.0f});
    CHECK(memory->params()[0] == 99.0f);
    CHECK(h.server.version() == (consistency == "async" ? 2 : 1));
  }
}

TEST_CASE("shard: sync parts through shared memory apply what parts in frames do") {
  Harness h(sgdJob("sync"), 2);
  h.init({10.0f, 20.0f, 30.0f, 40.0f});
  std::unique_ptr<ShardMemory> memory = ShardMemory::create(4);
  REQUIRE(h.attach(0, ::getpid(), memory->fd(), 4).header.kind == ps::Kind::Ack);
  // Worker 0's parts through its memory, last layers first; worker 1's in frames.
  h.pushPartShared(0, *memory, 1, 2, {1.0f, 2.0f});
  h.pushPart(1, 1, 0, {1.0f, 1.0f});
  h.pushPartShared(0, *memory, 1, 0, {0.5f, 0.25f});
  h.figures(0, 1);
  h.pushPart(1, 1, 2, {3.0f, 4.0f});
  h.figures(1, 1);
  const ps::Message shared = h.answer(0);
  REQUIRE(shared.header.kind == ps::Kind::Params);
  CHECK(shared.header.shared);
  CHECK(std::vector<float>(memory->params(), memory->params() + 4) ==
        std::vector<float>{8.5f, 18.75f, 26.0f, 34.0f});
  CHECK(h.answer(1).payload[0] == std::vector<float>{8.5f, 18.75f, 26.0f, 34.0f});
  // A part past the slice's end, or one through memory of another size, is refused.
  ps::Header wild = Harness::header(ps::Kind::PushPart, 0, 2);
  wild.offset = 3;
  wild.shared = true;
  wild.count = INT64_MAX;
  ps::send(h.workers[0], wild, {});
  ps::Message refused = h.answer(0);
  REQUIRE(refused.header.kind == ps::Kind::Failure);
  CHECK(refused.text.find("pushed floats [3, ...) of a slice of 4") != std::string::npos);
  std::unique_ptr<ShardMemory> larger = ShardMemory::create(5);
  REQUIRE(h.attach(1, ::getpid(), larger->fd(), 5).header.kind == ps::Kind::Ack);
  h.pushPartShared(1, *larger, 2, 0, {1.0f});
  refused = h.answer(1);
  REQUIRE(refused.header.kind == ps::Kind::Failure);
  CHECK(refused.text.find("through shared memory it has not attached") != std::string::npos);
}

TEST_CASE("shard: shared memory it cannot trust is refused in one line, and the shard serves on") {
  Harness h(sgdJob("async"), 1);
  h.init({0.0f, 0.0f});
  const auto refusal = [](const ps::Message& m) {
    REQUIRE(m.header.kind == ps::Kind::Failure);
    CHECK(m.text.find('\n') == std::string::npos);
    return m.text;
  };
  std::unique_ptr<ShardMemory> memory = ShardMemory::create(2);
  // Announced larger than it is: the shard would read past its end.
  CHECK(refusal(h.attach(0, ::getpid(), memory->fd(), 3)).find("holds 16 bytes, not the 24 announced") !=
        std::string::npos);
  // Not sealed: the worker could shrink it under the shard's mapping.
  const int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  REQUIRE(unsealed >= 0);
  REQUIRE(::ftruncate(unsealed, 16) == 0);
  CHECK(refusal(h.attach(0, ::getpid(), unsealed, 2)).find("not sealed at its size") != std::string::npos);
  ::close(unsealed);
  CHECK(refusal(h.attach(0, ::getpid(), 1000000, 2)).find("cannot open /proc/") != std::string::npos);
  CHECK(refusal(h.attach(0, -5, 3, 2)).find("no such shared memory") != std::string::npos);
  // A size that would wrap to the memory's true one in bytes.
  CHECK(
      refusal(h.attach(0, ::getpid(), memory->fd(), (int64_t{1} << 61) + 2)).find("no such shared memory") !=
      std::string::npos);
  // A push through memory never attached, or one of the wrong size.
  h.pushShared(0, *memory, 1, {1.0f, 1.0f});
  CHECK(refusal(h.answer(0)).find("shared memory it has not attached") != std::string::npos);
  std::unique_ptr<ShardMemory> larger = ShardMemory::create(3);
  REQUIRE(h.attach(0, ::getpid(), larger->fd(), 3).header.kind == ps::Kind::Ack);
  h.pushShared(0, *larger, 1, {1.0f, 1.0f, 1.0f});
  CHECK(refusal(h.answer(0)).find("pushed 3 gradients for 2 parameters") != std::string::npos);
  CHECK(h.server.version() == 0);
  h.push(0, 1, {0.5f, 0.5f});
  CHECK(h.answer(0).payload[0] == std::vector<float>{-0.5f, -0.5f});
}
