// How the ranks of a shared-memory group come to share one segment
// (internal to ShmProcessGroup):
//
//  1. Rank 0 creates the segment under a fresh name (ShmSegment::create),
//     lays out its header, and publishes the name in the store under
//     "<prefix>/segment" (an empty value when creating failed, so the others
//     fail at once instead of at the deadline).
//  2. The others read the name (waiting up to the timeout), open and map the
//     segment, and check that its header was made for their size and slot
//     size.
//  3. Each rank records its pid in its rank state and arrives at phase 1;
//     all wait (up to the timeout) until every rank has.
//  4. Each rank then removes the name (the first removal wins), so nothing
//     stays in /dev/shm whatever happens to the run later. A rank that fails
//     to join removes it too: the group cannot form without it.
//
// Errors are CommError clauses for the caller to prefix, naming the rank
// that did not join ("rank 2 did not join within 1 s") or the segment and
// what failed.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/comm/shm_segment.h"
#include "core/comm/store.h"

namespace dtrain {

// Collective over the `size` ranks (size >= 2). Returns the mapped segment,
// its name removed, with every rank at phase 1.
std::unique_ptr<ShmSegment> joinShmSegment(Store& store, int rank, int size, int64_t slotBytes,
                                           const std::string& prefix, std::chrono::milliseconds timeout);

}  // namespace dtrain
