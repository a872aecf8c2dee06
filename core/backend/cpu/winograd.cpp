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
// This file: the tile geometry and the filter-side transforms (scalar: the
// weights are small next to the activations). The activation-side transforms
// are in winograd_forward.cpp and winograd_backward.cpp.
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
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* k = w + (f * channels + c) * 9;
      float t[4][3];  // G g
      for (int col = 0; col < 3; ++col) {
        const float g0 = k[col], g1 = k[3 + col], g2 = k[6 + col];
        t[0][col] = g0;
        t[1][col] = 0.5f * (g0 + g1 + g2);
        t[2][col] = 0.5f * (g0 - g1 + g2);
        t[3][col] = g2;
      }
      float* dst = u + f * channels + c;
      for (int a = 0; a < 4; ++a) {  // (G g) G^T
        dst[(4 * a + 0) * stride] = t[a][0];
        dst[(4 * a + 1) * stride] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        dst[(4 * a + 2) * stride] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
        dst[(4 * a + 3) * stride] = t[a][2];
      }
    }
}

void winogradFilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw) {
  const int64_t stride = filters * channels;
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* src = du + f * channels + c;
      float d[4][4];
      for (int xi = 0; xi < 16; ++xi) d[xi / 4][xi % 4] = src[xi * stride];
      float r[3][4];  // G^T du
      for (int b = 0; b < 4; ++b) {
        r[0][b] = d[0][b] + 0.5f * (d[1][b] + d[2][b]);
        r[1][b] = 0.5f * (d[1][b] - d[2][b]);
        r[2][b] = 0.5f * (d[1][b] + d[2][b]) + d[3][b];
      }
      float* k = dw + (f * channels + c) * 9;
      for (int a = 0; a < 3; ++a) {  // (G^T du) G
        k[3 * a + 0] += r[a][0] + 0.5f * (r[a][1] + r[a][2]);
        k[3 * a + 1] += 0.5f * (r[a][1] - r[a][2]);
        k[3 * a + 2] += 0.5f * (r[a][1] + r[a][2]) + r[a][3];
      }
    }
}

const WinogradVariant& winograd2x2() {
  // The bias gradient's tile sum is the centre of A g A^T: a = b = 1.
  static const WinogradVariant variant{2,
                                       16,
                                       5,
                                       winogradTiles,
                                       winogradFilterTransform,
                                       winogradFilterGradTransform,
                                       winogradInputTransform,
                                       winogradOutputTransform,
                                       winogradGradOutputTransform,
                                       winogradGradInputTransform};
  return variant;
}

}  // namespace dtrain::ops
