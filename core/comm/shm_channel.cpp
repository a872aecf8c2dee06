#include "core/comm/shm_channel.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <thread>

#include "core/comm/shm_wait.h"
#include "core/errors.h"

namespace dtrain {

// At the start of the segment; the bytes follow. The counters only grow:
// written - read is what is in flight.
struct ShmChannel::Ring {
  alignas(64) std::atomic<uint64_t> written;
  alignas(64) std::atomic<uint64_t> read;
  alignas(64) std::atomic<int64_t> sender_pid;
  std::atomic<int64_t> receiver_pid;
  int64_t capacity;
};

namespace {

constexpr int64_t kRingHeader = 256;
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "the ring's counters are shared between processes");

}  // namespace

ShmChannel::ShmChannel(std::unique_ptr<ShmSegment> segment, std::string peer,
                       std::chrono::milliseconds timeout)
    : segment_(std::move(segment)),
      ring_(reinterpret_cast<Ring*>(segment_->data())),
      data_(segment_->data() + kRingHeader),
      capacity_(segment_->bytes() - kRingHeader),
      peer_(std::move(peer)),
      timeout_(timeout) {}

ShmChannel::~ShmChannel() {
  if (segment_) segment_->unlinkName();
}

std::unique_ptr<ShmChannel> ShmChannel::receiver(Store& store, const std::string& key, int64_t capacity,
                                                 std::string peer, std::chrono::milliseconds timeout) {
  static_assert(sizeof(Ring) <= kRingHeader, "the ring's header fits its reserved bytes");
  auto segment = ShmSegment::create(kRingHeader + std::max<int64_t>(capacity, 4096));
  auto* ring = new (segment->data()) Ring{};  // the zero-filled segment made an object
  ring->capacity = segment->bytes() - kRingHeader;
  ring->receiver_pid.store(::getpid(), std::memory_order_release);
  const std::string name = segment->name();
  store.set(key, Bytes(name.begin(), name.end()));
  return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(segment), std::move(peer), timeout));
}

std::unique_ptr<ShmChannel> ShmChannel::sender(Store& store, const std::string& key, std::string peer,
                                               std::chrono::milliseconds timeout) {
  const Bytes name = store.get(key, timeout);
  auto segment = ShmSegment::open(std::string(name.begin(), name.end()));
  segment->unlinkName();  // both ends have it mapped now
  std::unique_ptr<ShmChannel> out(new ShmChannel(std::move(segment), std::move(peer), timeout));
  out->ring_->sender_pid.store(::getpid(), std::memory_order_release);
  out->sending_ = true;
  return out;
}

template <typename Ready>
void ShmChannel::await(Ready&& ready, const char* what) {
  if (ready()) return;
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start;
  for (int spins = 0;; ++spins) {
    if (ready()) return;
    if (spins < 200) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(5);
    const int64_t pid = (sending_ ? ring_->receiver_pid : ring_->sender_pid).load(std::memory_order_acquire);
    if (pid != 0 && processHasExited(pid) && !ready())
      throw CommError(std::string(what) + ": " + peer_ + " (pid " + std::to_string(pid) + ") has exited");
    if (now - start > timeout_ && !ready())
      throw CommError(std::string(what) + ": " + peer_ + " did not take part within " +
                      shmDurationText(timeout_));
  }
}

void ShmChannel::send(const void* data, int64_t bytes) {
  const auto* from = static_cast<const uint8_t*>(data);
  const auto capacity = static_cast<uint64_t>(capacity_);
  while (bytes > 0) {
    const uint64_t written = ring_->written.load(std::memory_order_relaxed);
    uint64_t free = 0;
    await(
        [&] {
          free = capacity - (written - ring_->read.load(std::memory_order_acquire));
          return free > 0;
        },
        "send");
    const uint64_t at = written % capacity;
    const uint64_t n = std::min<uint64_t>({free, static_cast<uint64_t>(bytes), capacity - at});
    std::memcpy(data_ + at, from, n);
    ring_->written.store(written + n, std::memory_order_release);
    from += n;
    bytes -= static_cast<int64_t>(n);
  }
}

void ShmChannel::recv(void* data, int64_t bytes) {
  auto* to = static_cast<uint8_t*>(data);
  const auto capacity = static_cast<uint64_t>(capacity_);
  while (bytes > 0) {
    const uint64_t read = ring_->read.load(std::memory_order_relaxed);
    uint64_t ready = 0;
    await(
        [&] {
          ready = ring_->written.load(std::memory_order_acquire) - read;
          return ready > 0;
        },
        "receive");
    const uint64_t at = read % capacity;
    const uint64_t n = std::min<uint64_t>({ready, static_cast<uint64_t>(bytes), capacity - at});
    std::memcpy(to, data_ + at, n);
    ring_->read.store(read + n, std::memory_order_release);
    to += n;
    bytes -= static_cast<int64_t>(n);
  }
}

}  // namespace dtrain
