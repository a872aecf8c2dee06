// The Winograd transforms of each CPU level, side by side (the tests hold the
// AVX-512 ones to the AVX2 ones; ops::winograd2x2() and winograd4x4()
// return the active level's). Internal to core/backend/cpu.
#pragma once
#include "core/backend/cpu/cpu_level.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

// F(2x2,3x3) computed by `level`'s transform kernels.
const WinogradVariant& winograd2x2AtLevel(cpu::Level level);

// F(4x4,3x3) computed by `level`'s transform kernels.
const WinogradVariant& winograd4x4AtLevel(cpu::Level level);

// `base` with its activation transforms replaced by kernels that take the
// call's geometry (dimsOf(g)) and the input's channels, as the AVX-512 ones do.
template <class Dims, Dims (*dimsOf)(const Window2d&), auto input, auto output, auto gradOutput,
          auto gradInput>
WinogradVariant withGeometryTransforms(WinogradVariant base) {
  base.inputTransform = [](const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv,
                           int64_t plane) { input(x, n, g.channels, dimsOf(g), v, ldv, plane); };
  base.outputTransform = [](const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                            const Window2d& g, const float* bias, bool relu,
                            float* y) { output(m, ldm, plane, n, filters, dimsOf(g), bias, relu, y); };
  base.gradOutputTransform = [](const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                const Window2d& g, float* z, int64_t ldz, int64_t plane) {
    gradOutput(dy, relu_out, n, filters, dimsOf(g), z, ldz, plane);
  };
  base.gradInputTransform = [](const float* dv, int64_t ldv, int64_t plane, int64_t n, const Window2d& g,
                               float* dx) { gradInput(dv, ldv, plane, n, g.channels, dimsOf(g), dx); };
  return base;
}

}  // namespace dtrain::ops
