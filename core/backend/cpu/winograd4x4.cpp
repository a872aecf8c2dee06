// Winograd F(4x4,3x3) for 3x3 stride-1 convolution (Lavin & Gray, 2015): the
// same three identities as F(2x2,3x3) (winograd.cpp) with 6x6 transformed
// tiles, so 36 products per 16 outputs instead of 16 per 4:
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
//          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
//          1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Transformed index xi = 6a + b, a along H and b along W. The larger
// transforms round off more than F(2x2,3x3)'s (about 1e-6 relative at these
// magnitudes, from the 1/6 and 1/24 weights and the sums of six terms).
//
// This file: the geometry and the filter-side transforms (scalar). The
// activation-side transforms are in winograd4x4_forward.cpp and
// winograd4x4_backward.cpp.
#include "core/backend/cpu/winograd4x4_rows.h"

namespace dtrain::ops {

WinogradTiles winograd4x4Tiles(const Window2d& g) {
  return {(g.outHeight() + 3) / 4, (g.outWidth() + 3) / 4};
}

void winograd4x4FilterTransform(const float* w, int64_t filters, int64_t channels, float* u) {
  const int64_t stride = filters * channels;
  // G applied to three values.
  // Multiplies by rounded reciprocals rather than divides: this runs for
  // every filter on every step, and the difference is float round-off.
  auto g6 = [](float g0, float g1, float g2, float* out) {
    constexpr float k6 = 1.0f / 6.0f, k12 = 1.0f / 12.0f, k24 = 1.0f / 24.0f;
    out[0] = 0.25f * g0;
    out[1] = -(g0 + g1 + g2) * k6;
    out[2] = -(g0 - g1 + g2) * k6;
    out[3] = g0 * k24 + g1 * k12 + g2 * k6;
    out[4] = g0 * k24 - g1 * k12 + g2 * k6;
    out[5] = g2;
  };
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* k = w + (f * channels + c) * 9;
      float t[6][3];  // G g
      for (int col = 0; col < 3; ++col) {
        float out[6];
        g6(k[col], k[3 + col], k[6 + col], out);
        for (int a = 0; a < 6; ++a) t[a][col] = out[a];
      }
      float* dst = u + f * channels + c;
      for (int a = 0; a < 6; ++a) {  // (G g) G^T
        float out[6];
        g6(t[a][0], t[a][1], t[a][2], out);
        for (int b = 0; b < 6; ++b) dst[(6 * a + b) * stride] = out[b];
      }
    }
}

void winograd4x4FilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw) {
  const int64_t stride = filters * channels;
  // G^T applied to six values.
  auto gt3 = [](const float* u, float* out) {
    constexpr float k6 = 1.0f / 6.0f, k12 = 1.0f / 12.0f, k24 = 1.0f / 24.0f;
    out[0] = 0.25f * u[0] - (u[1] + u[2]) * k6 + (u[3] + u[4]) * k24;
    out[1] = (u[2] - u[1]) * k6 + (u[3] - u[4]) * k12;
    out[2] = (u[3] + u[4] - u[1] - u[2]) * k6 + u[5];
  };
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* src = du + f * channels + c;
      float r[3][6];  // G^T du
      for (int b = 0; b < 6; ++b) {
        float column[6], out[3];
        for (int a = 0; a < 6; ++a) column[a] = src[(6 * a + b) * stride];
        gt3(column, out);
        for (int i = 0; i < 3; ++i) r[i][b] = out[i];
      }
      float* k = dw + (f * channels + c) * 9;
      for (int i = 0; i < 3; ++i) {  // (G^T du) G
        float out[3];
        gt3(r[i], out);
        for (int j = 0; j < 3; ++j) k[3 * i + j] += out[j];
      }
    }
}

const WinogradVariant& winograd4x4() {
  // A's row 1 is all ones, so A g A^T's element (1, 1) is the tile's sum.
  static const WinogradVariant variant{4,
                                       36,
                                       7,
                                       winograd4x4Tiles,
                                       winograd4x4FilterTransform,
                                       winograd4x4FilterGradTransform,
                                       winograd4x4InputTransform,
                                       winograd4x4OutputTransform,
                                       winograd4x4GradOutputTransform,
                                       winograd4x4GradInputTransform};
  return variant;
}

}  // namespace dtrain::ops
