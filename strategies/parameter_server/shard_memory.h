// Memory a worker shares with a parameter-server shard on its own host: its
// pushes' gradients and the answers' parameters pass through it instead of
// through the socket, so a push and its answer cost one copy each way and a
// header-only message, not four copies through ZeroMQ's I/O threads and the
// kernel (ps_wire.h's Header::shared marks such a message).
//
// The worker makes it (memfd: no file to leave behind, even when killed),
// sealed at its size so that neither side can shrink it under the other's
// mapping; the shard opens it through /proc/PID/fd/FD, which the worker's
// Attach message names, and checks its size and seals before trusting it.
//
// Layout: the gradients of a push (`floats` floats), then the parameters of
// an answer (`floats` floats), both the shard's slice in flat order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace dtrain {

class ShardMemory {
 public:
  // The worker's side: `floats` floats each way. Throws Error when the system
  // refuses (no memfd, no memory); the caller then sends frames.
  static std::unique_ptr<ShardMemory> create(int64_t floats);
  // The shard's side: worker process `pid`'s descriptor `fd`, which must be
  // a sealed memfd of exactly `floats` floats each way. Throws Error saying
  // what is wrong with it.
  static std::unique_ptr<ShardMemory> open(int pid, int fd, int64_t floats);
  ~ShardMemory();
  ShardMemory(const ShardMemory&) = delete;
  ShardMemory& operator=(const ShardMemory&) = delete;

  // Copies n floats into the shared memory with stores that bypass the
  // cache: the other process reads them from memory, not from this core.
  static void streamInto(float* to, const float* from, int64_t n);

  float* grads() { return base_; }
  float* params() { return base_ + floats_; }
  int64_t floats() const { return floats_; }
  int fd() const { return fd_; }

 private:
  ShardMemory(int fd, float* base, int64_t floats) : fd_(fd), base_(base), floats_(floats) {}
  static size_t bytesFor(int64_t floats);

  int fd_;
  float* base_;
  int64_t floats_;
};

}  // namespace dtrain
