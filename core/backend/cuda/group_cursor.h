// Grid-stride loops over a tensor laid out as [outer, groups, plane] that need
// each element's group (the bias column of a matrix, the channel of an NCHW
// tensor): GroupCursor keeps group = (i / plane) % groups up to date as i
// advances by a fixed stride, with additions instead of two 64-bit divisions
// per element (which would cost more than the memory access on a GPU).
// A matrix [rows, cols] is the case plane = 1, groups = cols.
#pragma once
#include <cstdint>

#include "core/backend/host_device.h"

namespace dtrain::cuda {

struct GroupCursor {
  int64_t pos;    // i % plane
  int64_t group;  // (i / plane) % groups
  int64_t plane, groups;
  int64_t step_pos, step_group;  // the stride's own (pos, group), the group reduced modulo groups

  // Preconditions: i >= 0, stride > 0, plane > 0, groups > 0.
  DTRAIN_HOST_DEVICE GroupCursor(int64_t i, int64_t stride, int64_t plane_, int64_t groups_)
      : pos(i % plane_),
        group((i / plane_) % groups_),
        plane(plane_),
        groups(groups_),
        step_pos(stride % plane_),
        step_group((stride / plane_) % groups_) {}

  // i += stride. Both sums stay below twice their modulus, so one subtraction
  // each brings them back into range.
  DTRAIN_HOST_DEVICE void advance() {
    pos += step_pos;
    const int64_t carry = pos >= plane ? 1 : 0;
    pos -= carry * plane;
    group += step_group + carry;
    if (group >= groups) group -= groups;
  }
};

}  // namespace dtrain::cuda
