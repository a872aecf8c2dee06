// Waiting on the peers of a shared-memory group (ShmProcessGroup): how a
// rank waits for the others to arrive at a phase, with the group's deadline,
// and how it tells that a peer will never come (its process has exited, or it
// left the group) without waiting out the deadline.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/comm/shm_layout.h"

namespace dtrain {

// True when process `pid` has ended: gone (kill reports ESRCH), or a zombie
// its parent has not reaped yet (kill still finds those). A peer rank is a
// sibling, reaped by the host process, so it is often a zombie for a while.
bool processHasExited(int64_t pid);

// This process's pid namespace (the inode of /proc/self/ns/pid), 0 when
// unknown. A pid means the same process to two ranks only when theirs match.
uint64_t currentPidNamespace();

// "250 ms", "1.5 s".
std::string shmDurationText(std::chrono::milliseconds d);

// Records that the rank owning `own` has arrived at `arrivals` (1 for joining,
// then one more per phase) and wakes the peers sleeping until it does. What
// the rank wrote before is visible to a peer that sees the arrival.
void announceArrival(ShmRankState& own, uint64_t arrivals);

// What a wait is for: joining the group or a phase of a call (the wording of errors).
enum class ShmWaitPurpose { Join, Call };

// Blocks until every rank but `self` has arrived at `target` (its arrivals
// counter reached it); what they wrote before arriving is then visible here.
// A waiter spins for some microseconds (a peer on another core often comes
// within them), yields for a few hundred, then sleeps on the peer's arrival
// word (a futex), so that a long wait takes no CPU from computing threads.
// Every few milliseconds it checks the ranks still awaited, and throws
// CommError with a clause naming one that cannot come: "rank 1 (pid 12345)
// has exited" or "rank 1 left the group (...)". A peer that is there but does
// not arrive makes it throw after `timeout`: "rank 1 did not take part within
// 1 s" ("did not join" when joining). Pid checks are made only for peers in
// this rank's pid namespace (as recorded in the layout). When `abandoned`
// (may be null) turns true, it throws at its next check.
void awaitArrivals(const ShmLayout& layout, int self, uint64_t target, std::chrono::milliseconds timeout,
                   ShmWaitPurpose purpose, const std::atomic<bool>* abandoned = nullptr);

}  // namespace dtrain
