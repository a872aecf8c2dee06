// This process's memory as the kernel keeps it. Memory a buffer holds only
// while it is needed: zeroing a range of a host buffer by handing its whole
// pages back to the operating system; what is resident; and the kernel's
// out-of-memory kills, which a host reports with its killed workers. A private
// anonymous page (what malloc and aligned_alloc hand out, whether from the
// heap or from a mapping of its own) reads as zeros when next touched and
// costs no memory until then, so a flat buffer whose parts are needed one
// at a time (a sharded run's gradients) is resident only where it is used.
//
// Thread-safe for disjoint ranges.
#pragma once
#include <cstdint>

namespace dtrain {

// Zeroes data[begin, end): the whole pages inside it go back to the system
// (madvise MADV_DONTNEED), the partial pages at its ends are zeroed in
// place. Returns the bytes handed back. `data` must come from ordinary
// private host memory (not a shared or file mapping, not device memory).
int64_t releaseFloats(float* data, int64_t begin, int64_t end);

// How many bytes of the pages holding data[0, n) are resident in RAM now
// (mincore): a buffer's real cost when parts of it have been handed back.
int64_t residentBytes(const float* data, int64_t n);

// The bytes of this process's memory resident in RAM now and at most since
// it started (VmRSS and VmHWM of /proc/self/status; 0 where unreadable).
struct ResidentMemory {
  int64_t now_bytes = 0;
  int64_t peak_bytes = 0;
};
ResidentMemory residentMemory();

// How many processes the kernel's out-of-memory killer has ended since boot
// (/proc/vmstat oom_kill, memory cgroups' kills included); 0 where unknown.
int64_t oomKillCount();

}  // namespace dtrain
