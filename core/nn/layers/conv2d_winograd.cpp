// Conv2d's Winograd algorithms: chunks of samples go through the input
// transform, one product per transform element (16 for F(2x2,3x3), 36 for
// F(4x4,3x3)) and the output transform; see ops.h for the transforms.
#include <algorithm>

#include "core/backend/ops.h"
#include "core/nn/layers/conv2d.h"

namespace dtrain {

namespace {

// Tiles per Winograd chunk: the products run near peak from about 200 tiles
// on; much larger chunks only grow the scratch buffers.
constexpr int64_t kWinogradChunkTiles = 256;
// F(4x4,3x3) tiles hold four times the outputs and 36 transformed values
// instead of 16: half as many keep a chunk's transformed input in L2
// (measured on ResNet-20's layers: 128 beat 256 at 32x32 and equalled it at 16x16).
constexpr int64_t kWinograd4x4ChunkTiles = 128;

int64_t roundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace

int64_t Conv2d::winogradChunk() const {
  const int64_t tiles = winograd_->tile == 4 ? kWinograd4x4ChunkTiles : kWinogradChunkTiles;
  return std::max<int64_t>(1, tiles / winograd_->tiles(geom_).perSample());
}

void Conv2d::forwardWinograd(const float* x, int64_t n, float* y) {
  const ops::WinogradVariant& w = *winograd_;
  const int64_t f = config_.filters, c = geom_.channels, t = w.tiles(geom_).perSample(), e = w.elements;
  const int64_t chunk = winogradChunk(), ld = roundUp(chunk * t, 8);
  const int64_t vplane = ops::winogradPlaneStride(c, ld), mplane = ops::winogradPlaneStride(f, ld);
  float* u = scratch().u.floats(e * f * c);
  float* v = scratch().v.floats(e * vplane);
  float* m = scratch().m.floats(e * mplane);
  w.filterTransform(weight_.data(), f, c, u);
  const int64_t in_size = c * geom_.inPlane(), out_size = f * geom_.outPlane();
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t nb = std::min(chunk, n - s0), cols = nb * t;
    w.inputTransform(x + s0 * in_size, nb, geom_, v, ld, vplane);
    for (int xi = 0; xi < e; ++xi) {
      const float* ux = u + xi * f * c;
      if (unpacked_)
        ops::gemmUnpacked(false, f, cols, c, ux, c, v + xi * vplane, ld, m + xi * mplane, ld);
      else
        ops::gemm(false, false, f, cols, c, 1.0f, ux, c, v + xi * vplane, ld, 0.0f, m + xi * mplane, ld);
    }
    w.outputTransform(m, ld, mplane, nb, f, geom_, config_.bias ? bias_.data() : nullptr, relu_,
                      y + s0 * out_size);
  }
}

void Conv2d::backwardWinograd(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                              bool param_grads) {
  const ops::WinogradVariant& w = *winograd_;
  const int64_t f = config_.filters, c = geom_.channels, t = w.tiles(geom_).perSample(), e = w.elements;
  const int64_t chunk = winogradChunk(), ld = roundUp(chunk * t, 8);
  const int64_t vplane = ops::winogradPlaneStride(c, ld), zplane = ops::winogradPlaneStride(f, ld);
  // u is recomputed rather than kept from forward: it is cheap, and backward
  // then does not depend on which forward ran last.
  float* u = dx ? scratch().u.floats(e * f * c) : nullptr;
  float* du = param_grads ? scratch().du.floats(e * f * c) : nullptr;
  float* v = scratch().v.floats(e * vplane);
  float* z = scratch().m.floats(e * zplane);
  if (dx) w.filterTransform(weight_.data(), f, c, u);
  if (du) std::fill(du, du + e * f * c, 0.0f);
  const int64_t in_size = c * geom_.inPlane(), out_size = f * geom_.outPlane();
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t nb = std::min(chunk, n - s0), cols = nb * t;
    if (du) w.inputTransform(x + s0 * in_size, nb, geom_, v, ld, vplane);
    w.gradOutputTransform(dy + s0 * out_size, relu_ ? y + s0 * out_size : nullptr, nb, f, geom_, z, ld,
                          zplane);
    for (int xi = 0; xi < e; ++xi) {
      float* vx = v + xi * vplane;
      const float* zx = z + xi * zplane;
      // du_xi += z_xi v_xi^T; then v_xi is free and receives dv_xi = u_xi^T z_xi.
      if (du) ops::gemm(false, true, f, c, cols, 1.0f, zx, ld, vx, ld, 1.0f, du + xi * f * c, c);
      if (dx && unpacked_)
        ops::gemmUnpacked(true, c, cols, f, u + xi * f * c, c, zx, ld, vx, ld);
      else if (dx)
        ops::gemm(true, false, c, cols, f, 1.0f, u + xi * f * c, c, zx, ld, 0.0f, vx, ld);
    }
    if (dx) w.gradInputTransform(v, ld, vplane, nb, geom_, dx + s0 * in_size);
    // The bias gradient is the sum of each dY tile, which is one of z's
    // elements (w.tile_sum): no extra pass over dY.
    if (config_.bias && du)
      for (int64_t fi = 0; fi < f; ++fi)
        ops::biasGradPlanes(z + w.tile_sum * zplane + fi * ld, 1, cols, dbias_.data() + fi);
  }
  if (du) w.filterGradTransform(du, f, c, dweight_.data());
}

}  // namespace dtrain
