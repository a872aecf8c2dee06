// The Winograd transforms of each CPU level, side by side (the tests hold the
// AVX-512 ones to the AVX2 ones; ops::winograd4x4() returns the active
// level's). Internal to core/backend/cpu.
#pragma once
#include "core/backend/cpu/cpu_level.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

// F(4x4,3x3) computed by `level`'s transform kernels.
const WinogradVariant& winograd4x4AtLevel(cpu::Level level);

}  // namespace dtrain::ops
