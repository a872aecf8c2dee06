#include "core/comm/shm_join.h"

#include <unistd.h>

#include "core/comm/shm_layout.h"
#include "core/comm/shm_wait.h"
#include "core/errors.h"

namespace dtrain {

namespace {

std::string segmentKey(const std::string& prefix) { return prefix + "/segment"; }

std::unique_ptr<ShmSegment> createAndPublish(Store& store, int size, int64_t slotBytes,
                                             const std::string& prefix) {
  const std::string key = segmentKey(prefix);
  if (store.check(key))
    throw CommError("the store already holds a group under the prefix '" + prefix +
                    "' (give each group its own prefix, e.g. with the run's generation)");
  std::unique_ptr<ShmSegment> segment;
  try {
    segment = ShmSegment::create(ShmLayout::totalBytes(size, slotBytes));
    ShmLayout::initialise(segment->data(), size, slotBytes);
  } catch (...) {
    try {
      store.set(key, Bytes{});  // no segment: the others stop waiting
    } catch (const std::exception&) {
      // The store is failing too; the others find out at their deadline.
    }
    throw;
  }
  const std::string& name = segment->name();
  try {
    store.set(key, Bytes(name.begin(), name.end()));
  } catch (...) {
    segment->unlinkName();
    throw;
  }
  return segment;
}

// Refuses a segment made for another size or slot size; marks this rank as
// gone in it where it has a place there, so rank 0 and the others stop
// waiting for it at once.
void checkMadeFor(ShmSegment& segment, int rank, int size, int64_t slotBytes) {
  const ShmSegmentInfo& info = ShmLayout::infoOf(segment.data());
  if (segment.bytes() < int64_t(sizeof(ShmSegmentInfo)) || info.magic != kShmMagic ||
      info.version != kShmVersion)
    throw CommError("the shared-memory segment " + segment.name() +
                    " is not one of this dtrain version's groups (mixed dtrain builds?)");
  const bool layoutSound = info.size >= 1 && info.slotBytes > 0 &&
                           info.totalBytes == ShmLayout::totalBytes(info.size, info.slotBytes) &&
                           info.totalBytes == segment.bytes();
  if (layoutSound && info.size == size && info.slotBytes == slotBytes) return;
  if (layoutSound && rank < info.size)
    ShmLayout(segment.data(), info.size, info.slotBytes).rank(rank).left.store(1, std::memory_order_release);
  throw CommError("rank 0 made the group for " + std::to_string(info.size) + " ranks with " +
                  std::to_string(info.slotBytes) + "-byte slots, but this rank was given " +
                  std::to_string(size) + " ranks and " + std::to_string(slotBytes) +
                  "-byte slots (every rank needs the same size and slot_bytes)");
}

std::unique_ptr<ShmSegment> openPublished(Store& store, int rank, int size, int64_t slotBytes,
                                          const std::string& prefix, std::chrono::milliseconds timeout) {
  Bytes value;
  try {
    value = store.get(segmentKey(prefix), timeout);
  } catch (const CommError&) {
    throw CommError("rank 0 did not join within " + shmDurationText(timeout) +
                    " (is every rank started, with the same store, size and prefix '" + prefix + "'?)");
  }
  if (value.empty()) throw CommError("rank 0 could not create the shared-memory segment (see its error)");
  std::unique_ptr<ShmSegment> segment = ShmSegment::open(std::string(value.begin(), value.end()));
  try {
    checkMadeFor(*segment, rank, size, slotBytes);
  } catch (...) {
    segment->unlinkName();  // the group cannot form without this rank
    throw;
  }
  return segment;
}

}  // namespace

std::unique_ptr<ShmSegment> joinShmSegment(Store& store, int rank, int size, int64_t slotBytes,
                                           const std::string& prefix, std::chrono::milliseconds timeout) {
  std::unique_ptr<ShmSegment> segment = rank == 0
                                            ? createAndPublish(store, size, slotBytes, prefix)
                                            : openPublished(store, rank, size, slotBytes, prefix, timeout);
  const ShmLayout layout(segment->data(), size, slotBytes);
  ShmRankState& own = layout.rank(rank);
  try {
    own.pidNamespace.store(currentPidNamespace(), std::memory_order_relaxed);
    own.pid.store(::getpid(), std::memory_order_release);
    announceArrival(own, 1);
    awaitArrivals(layout, rank, 1, timeout, ShmWaitPurpose::Join);
  } catch (...) {
    own.left.store(1, std::memory_order_release);
    segment->unlinkName();
    throw;
  }
  segment->unlinkName();
  return segment;
}

}  // namespace dtrain
