#include "core/comm/shm_wait.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cerrno>
#include <climits>
#include <sstream>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/util/process_state.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

// A waiter spins, then yields, then sleeps. Spinning answers fastest when the
// peer runs on another core; yielding lets a computing thread of this core
// go on while the peer is still close; sleeping costs nothing while it is far
// (a slower rank's backward, milliseconds away) but takes tens of microseconds
// to wake from, which the two-rank mlp step (about 3 ms) felt as 8% slower.
constexpr auto kSpinFor = std::chrono::microseconds(20);
constexpr auto kYieldUntil = std::chrono::microseconds(220);
// How often a waiter looks at the awaited peers' pids and left flags: a
// syscall per peer, so not on every round.
constexpr auto kCheckEvery = std::chrono::milliseconds(2);

inline void cpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool arrived(const ShmRankState& peer, uint64_t target) {
  return peer.arrivals.load(std::memory_order_acquire) >= target;
}

// The futex calls work on the word's address in every process that maps the
// segment (no FUTEX_PRIVATE_FLAG). Elsewhere than Linux a waiter naps briefly.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

void sleepWhileWordIs(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::nanoseconds at_most) {
#if defined(__linux__)
  struct timespec limit {};
  limit.tv_sec = static_cast<time_t>(at_most.count() / 1000000000);
  limit.tv_nsec = static_cast<long>(at_most.count() % 1000000000);
  // Returns at a wake-up, when the word is no longer `seen`, at the limit or
  // on a signal: the caller looks again in every case.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &limit, nullptr, 0);
#else
  (void)word;
  (void)seen;
  std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(at_most, std::chrono::microseconds(50)));
#endif
}

void wakeSleepers(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

// One round of waiting for `peer` to reach `target`, ending by `until`: a few
// pause hints while the wait is young, a yield a little later, then a sleep
// on its arrival word.
void waitRound(ShmRankState& peer, uint64_t target, Clock::time_point start, Clock::time_point now,
               Clock::time_point until) {
  if (now - start < kSpinFor) {
    for (int i = 0; i < 16; ++i) cpuRelax();
    return;
  }
  if (now - start < kYieldUntil) {
    std::this_thread::yield();
    return;
  }
  // The word is read before the counter: an arrival after this read changes
  // the word, so the futex call returns at once instead of sleeping through it.
  const uint32_t seen = peer.arrivalWord.load(std::memory_order_seq_cst);
  peer.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!arrived(peer, target) && until > now) sleepWhileWordIs(peer.arrivalWord, seen, until - now);
  peer.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Throws when a rank from `first` on that has not arrived never will.
void checkAwaitedCanCome(const ShmLayout& layout, int self, int first, uint64_t target,
                         ShmWaitPurpose purpose) {
  const uint64_t ownNamespace = layout.rank(self).pidNamespace.load(std::memory_order_relaxed);
  for (int r = first; r < layout.size(); ++r) {
    if (r == self) continue;
    const ShmRankState& peer = layout.rank(r);
    if (arrived(peer, target)) continue;
    // A rank that arrives and then leaves or exits (its last call done) has
    // arrived: its counter is written before its flag, and looked at again.
    if (peer.left.load(std::memory_order_acquire) != 0 && !arrived(peer, target))
      throw CommError("rank " + std::to_string(r) +
                      (purpose == ShmWaitPurpose::Join
                           ? " gave up joining (see its error)"
                           : " left the group (a call of its own failed, or it destroyed its group)"));
    const int64_t pid = peer.pid.load(std::memory_order_acquire);
    const bool samePidNamespace =
        ownNamespace != 0 && peer.pidNamespace.load(std::memory_order_relaxed) == ownNamespace;
    if (pid != 0 && samePidNamespace && processHasExited(pid) && !arrived(peer, target))
      throw CommError("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") has exited");
  }
}

}  // namespace

bool processHasExited(int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) return true;
  // Still there for kill: a zombie? Without /proc only kill's answer counts.
  const char state = processState(pid);
  return state == 'Z' || state == 'X';
}

uint64_t currentPidNamespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

std::string shmDurationText(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + " ms";
  std::ostringstream out;
  out << static_cast<double>(d.count()) / 1000.0 << " s";
  return out.str();
}

void announceArrival(ShmRankState& own, uint64_t arrivals) {
  own.arrivals.store(arrivals, std::memory_order_release);
  own.arrivalWord.store(static_cast<uint32_t>(arrivals), std::memory_order_seq_cst);
  // A sleeper registers before it looks at the counter (both sequentially
  // consistent): either it sees this arrival or this load sees it. A wake-up
  // missed any other way costs at most one check interval.
  if (own.sleepers.load(std::memory_order_seq_cst) != 0) wakeSleepers(own.arrivalWord);
}

void awaitArrivals(const ShmLayout& layout, int self, uint64_t target, std::chrono::milliseconds timeout,
                   ShmWaitPurpose purpose, const std::atomic<bool>* abandoned) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  Clock::time_point nextCheck = start + kCheckEvery;
  // Counters only grow: a rank seen arrived stays arrived, so the ranks are
  // awaited one after the other.
  for (int r = 0; r < layout.size(); ++r) {
    if (r == self) continue;
    ShmRankState& peer = layout.rank(r);
    while (!arrived(peer, target)) {
      const Clock::time_point now = Clock::now();
      if (now >= nextCheck || now >= deadline) {
        if (abandoned && abandoned->load(std::memory_order_acquire))
          throw CommError("left the call: the run is re-forming its group");
        checkAwaitedCanCome(layout, self, r, target, purpose);
        nextCheck = now + kCheckEvery;
      }
      if (now >= deadline) {
        std::vector<int> missing;
        for (int m = r; m < layout.size(); ++m)
          if (m != self && !arrived(layout.rank(m), target)) missing.push_back(m);
        if (missing.empty()) return;  // the last one came just now
        throw CommError(
            ranksText(missing) +
            (purpose == ShmWaitPurpose::Join ? " did not join within " : " did not take part within ") +
            shmDurationText(timeout));
      }
      waitRound(peer, target, start, now, std::min(nextCheck, deadline));
    }
  }
}

}  // namespace dtrain
