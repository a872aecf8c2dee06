// Depthwise convolution (a grouped convolution with one group per input
// channel), computed directly rather than as C tiny matrix products: each
// output plane is a weighted sum of shifted copies of one input plane, which
// is memory-bound and vectorises along the plane. Same conventions as ops.h
// (NCHW, "writes" overwrites, "accumulates" adds; reentrant, no allocation).
//
// Geometry: g describes the input [C,H,W], kernel, stride and padding; with
// depth multiplier m there are C*m output planes, and output plane c*m + k
// convolves input plane c with filter c*m + k (w [C*m, 1, kh, kw], PyTorch's
// layout for groups = C). 3x3 kernels with padding 1 and stride 1 or 2 (the
// MobileNet blocks) take hand-vectorised paths; every other geometry takes a
// plain direct one.
//
// scratch: depthwiseScratchFloats(g) floats, 32-byte aligned, owned by the
// caller (contents need not be kept between calls).
#pragma once
#include <cstdint>

#include "core/backend/ops.h"

namespace dtrain::ops {

// Floats of scratch the functions below need for geometry g.
int64_t depthwiseScratchFloats(const Window2d& g);
// Whether g takes a vectorised path (3x3, padding 1, stride 1 or 2).
bool depthwiseVectorised(const Window2d& g);

// y [n, C*m, Ho, Wo] = act(conv(x [n,C,H,W], w) + bias); bias may be null;
// act is relu when `relu`, else the identity. Writes y.
void depthwiseForward(const float* x, int64_t n, const Window2d& g, int64_t multiplier, const float* w,
                      const float* bias, bool relu, float* y, float* scratch);

// The three gradients in one pass over the planes, from dy [n, C*m, Ho, Wo],
// masked by relu_out > 0 first when relu_out (the forward's output, a fused
// relu) is given. Accumulates dw [C*m, kh*kw] and, when given, dbias [C*m];
// writes dx [n,C,H,W] when it is not null (the network input needs none).
void depthwiseBackward(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                       int64_t multiplier, const float* w, float* dw, float* dbias, float* dx,
                       float* scratch);

}  // namespace dtrain::ops
