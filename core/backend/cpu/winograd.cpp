// Winograd F(2x2,3x3) transforms for 3x3 stride-1 convolution (Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015):
//   forward        Y  = A^T [ (G g G^T) (.) (B^T d B) ] A
//   weight grad    dg = G^T [ (A dY A^T) (.) (B^T d B) ] G
//   input grad     dd = B   [ (A dY A^T) (.) (G g G^T) ] B^T
// The two gradient forms follow from the forward bilinear identity, so one
// transformed input serves forward and weight gradient, and one transformed
// output gradient serves both gradients. Transformed index xi = 4a + b, where
// a runs along H and b along W.
//
// This file: the tile geometry and the filter-side transforms (a block of
// channels at a time, see winograd_filter_block.h). The activation-side transforms
// are in winograd_forward.cpp and winograd_backward.cpp.
#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/winograd_filter_block.h"
#include "core/backend/cpu/winograd_levels.h"
#include "core/backend/cpu/winograd_rows.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

bool winogradSupported(const Window2d& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h >= 0 &&
         g.pad_h <= 2 && g.pad_w >= 0 && g.pad_w <= 2 && g.height + 2 * g.pad_h >= 3 &&
         g.width + 2 * g.pad_w >= 3 && g.width + 2 * g.pad_w <= kWinogradMaxPaddedWidth;
}

WinogradTiles winogradTiles(const Window2d& g) { return {(g.outHeight() + 1) / 2, (g.outWidth() + 1) / 2}; }

int64_t winogradPlaneStride(int64_t rows, int64_t ld) {
  // The 16 planes are read and written together; a stride that is an odd
  // multiple of 64 bytes spreads them over 16 different L1 sets instead of
  // piling them into one (a multiple of 4 KiB would).
  int64_t plane = (rows * ld + 15) / 16 * 16;
  if ((plane / 16) % 2 == 0) plane += 16;
  return plane;
}

void winogradFilterTransform(const float* w, int64_t filters, int64_t channels, float* u) {
  const int64_t stride = filters * channels;
  FilterTaps k;
  float t[4][3][kFilterChannelBlock];  // G g, per channel of the block
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c0 = 0; c0 < channels; c0 += kFilterChannelBlock) {
      const int64_t cb = std::min(kFilterChannelBlock, channels - c0);
      k.load(w + (f * channels + c0) * 9, cb);
      for (int col = 0; col < 3; ++col)
        for (int64_t c = 0; c < cb; ++c) {
          const float g0 = k.v[col][c], g1 = k.v[3 + col][c], g2 = k.v[6 + col][c];
          t[0][col][c] = g0;
          t[1][col][c] = 0.5f * (g0 + g1 + g2);
          t[2][col][c] = 0.5f * (g0 - g1 + g2);
          t[3][col][c] = g2;
        }
      float* dst = u + f * channels + c0;
      for (int a = 0; a < 4; ++a)  // (G g) G^T
        for (int64_t c = 0; c < cb; ++c) {
          dst[(4 * a + 0) * stride + c] = t[a][0][c];
          dst[(4 * a + 1) * stride + c] = 0.5f * (t[a][0][c] + t[a][1][c] + t[a][2][c]);
          dst[(4 * a + 2) * stride + c] = 0.5f * (t[a][0][c] - t[a][1][c] + t[a][2][c]);
          dst[(4 * a + 3) * stride + c] = t[a][2][c];
        }
    }
}

void winogradFilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw) {
  const int64_t stride = filters * channels;
  float r[3][4][kFilterChannelBlock];  // G^T du, per channel of the block
  FilterTaps k;
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c0 = 0; c0 < channels; c0 += kFilterChannelBlock) {
      const int64_t cb = std::min(kFilterChannelBlock, channels - c0);
      const float* src = du + f * channels + c0;
      for (int b = 0; b < 4; ++b)
        for (int64_t c = 0; c < cb; ++c) {
          const float d0 = src[b * stride + c], d1 = src[(4 + b) * stride + c],
                      d2 = src[(8 + b) * stride + c], d3 = src[(12 + b) * stride + c];
          r[0][b][c] = d0 + 0.5f * (d1 + d2);
          r[1][b][c] = 0.5f * (d1 - d2);
          r[2][b][c] = 0.5f * (d1 + d2) + d3;
        }
      for (int a = 0; a < 3; ++a)  // (G^T du) G
        for (int64_t c = 0; c < cb; ++c) {
          k.v[3 * a + 0][c] = r[a][0][c] + 0.5f * (r[a][1][c] + r[a][2][c]);
          k.v[3 * a + 1][c] = 0.5f * (r[a][1][c] - r[a][2][c]);
          k.v[3 * a + 2][c] = 0.5f * (r[a][1][c] + r[a][2][c]) + r[a][3][c];
        }
      k.addTo(dw + (f * channels + c0) * 9, cb);
    }
}

const WinogradVariant& winograd2x2AtLevel(cpu::Level level) {
  // The bias gradient's tile sum is the centre of A g A^T: a = b = 1.
  static const WinogradVariant avx2{2,
                                    16,
                                    5,
                                    winogradTiles,
                                    winogradFilterTransform,
                                    winogradFilterGradTransform,
                                    winogradInputTransform,
                                    winogradOutputTransform,
                                    winogradGradOutputTransform,
                                    winogradGradInputTransform};
  static const WinogradVariant wide =
      withGeometryTransforms<winograd::Dims, winograd::dims, avx512::winograd2x2InputTransform,
                             avx512::winograd2x2OutputTransform, avx512::winograd2x2GradOutputTransform,
                             avx512::winograd2x2GradInputTransform>(avx2);
  return level >= cpu::Level::Avx512 ? wide : avx2;
}

const WinogradVariant& winograd2x2() {
  static const WinogradVariant& variant = winograd2x2AtLevel(cpu::activeLevel());
  return variant;
}

}  // namespace dtrain::ops
