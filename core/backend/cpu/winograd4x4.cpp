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
// This file: the geometry and the filter-side transforms (a block of channels
// at a time, see winograd_filter_block.h). The
// activation-side transforms are in winograd4x4_forward.cpp and
// winograd4x4_backward.cpp.
#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/winograd4x4_rows.h"
#include "core/backend/cpu/winograd_filter_block.h"
#include "core/backend/cpu/winograd_levels.h"

namespace dtrain::ops {

WinogradTiles winograd4x4Tiles(const Window2d& g) {
  return {(g.outHeight() + 3) / 4, (g.outWidth() + 3) / 4};
}

void winograd4x4FilterTransform(const float* w, int64_t filters, int64_t channels, float* u) {
  const int64_t stride = filters * channels;
  // G applied to three values per channel of a block of cb.
  // Multiplies by rounded reciprocals rather than divides: this runs for
  // every filter on every step, and the difference is float round-off.
  auto g6 = [](const float* g0, const float* g1, const float* g2, float* const out[6], int64_t cb) {
    constexpr float k6 = 1.0f / 6.0f, k12 = 1.0f / 12.0f, k24 = 1.0f / 24.0f;
    for (int64_t c = 0; c < cb; ++c) {
      out[0][c] = 0.25f * g0[c];
      out[1][c] = -(g0[c] + g1[c] + g2[c]) * k6;
      out[2][c] = -(g0[c] - g1[c] + g2[c]) * k6;
      out[3][c] = g0[c] * k24 + g1[c] * k12 + g2[c] * k6;
      out[4][c] = g0[c] * k24 - g1[c] * k12 + g2[c] * k6;
      out[5][c] = g2[c];
    }
  };
  FilterTaps k;
  float t[6][3][kFilterChannelBlock];  // G g
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c0 = 0; c0 < channels; c0 += kFilterChannelBlock) {
      const int64_t cb = std::min(kFilterChannelBlock, channels - c0);
      k.load(w + (f * channels + c0) * 9, cb);
      for (int col = 0; col < 3; ++col) {
        float* const out[6] = {t[0][col], t[1][col], t[2][col], t[3][col], t[4][col], t[5][col]};
        g6(k.v[col], k.v[3 + col], k.v[6 + col], out, cb);
      }
      float* dst = u + f * channels + c0;
      for (int a = 0; a < 6; ++a) {  // (G g) G^T
        float* const out[6] = {dst + (6 * a) * stride,     dst + (6 * a + 1) * stride,
                               dst + (6 * a + 2) * stride, dst + (6 * a + 3) * stride,
                               dst + (6 * a + 4) * stride, dst + (6 * a + 5) * stride};
        g6(t[a][0], t[a][1], t[a][2], out, cb);
      }
    }
}

void winograd4x4FilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw) {
  const int64_t stride = filters * channels;
  // G^T applied to six values per channel of a block of cb.
  auto gt3 = [](const float* const u[6], float* const out[3], int64_t cb) {
    constexpr float k6 = 1.0f / 6.0f, k12 = 1.0f / 12.0f, k24 = 1.0f / 24.0f;
    for (int64_t c = 0; c < cb; ++c) {
      out[0][c] = 0.25f * u[0][c] - (u[1][c] + u[2][c]) * k6 + (u[3][c] + u[4][c]) * k24;
      out[1][c] = (u[2][c] - u[1][c]) * k6 + (u[3][c] - u[4][c]) * k12;
      out[2][c] = (u[3][c] + u[4][c] - u[1][c] - u[2][c]) * k6 + u[5][c];
    }
  };
  float r[3][6][kFilterChannelBlock];  // G^T du
  FilterTaps k;
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c0 = 0; c0 < channels; c0 += kFilterChannelBlock) {
      const int64_t cb = std::min(kFilterChannelBlock, channels - c0);
      const float* src = du + f * channels + c0;
      for (int b = 0; b < 6; ++b) {
        const float* const column[6] = {src + b * stride,        src + (6 + b) * stride,
                                        src + (12 + b) * stride, src + (18 + b) * stride,
                                        src + (24 + b) * stride, src + (30 + b) * stride};
        float* const out[3] = {r[0][b], r[1][b], r[2][b]};
        gt3(column, out, cb);
      }
      for (int i = 0; i < 3; ++i) {  // (G^T du) G
        const float* const row[6] = {r[i][0], r[i][1], r[i][2], r[i][3], r[i][4], r[i][5]};
        float* const out[3] = {k.v[3 * i], k.v[3 * i + 1], k.v[3 * i + 2]};
        gt3(row, out, cb);
      }
      k.addTo(dw + (f * channels + c0) * 9, cb);
    }
}

const WinogradVariant& winograd4x4AtLevel(cpu::Level level) {
  // A's row 1 is all ones, so A g A^T's element (1, 1) is the tile's sum.
  static const WinogradVariant avx2{4,
                                    36,
                                    7,
                                    winograd4x4Tiles,
                                    winograd4x4FilterTransform,
                                    winograd4x4FilterGradTransform,
                                    winograd4x4InputTransform,
                                    winograd4x4OutputTransform,
                                    winograd4x4GradOutputTransform,
                                    winograd4x4GradInputTransform};
  static const WinogradVariant wide =
      withGeometryTransforms<winograd4::Dims, winograd4::dims, avx512::winograd4x4InputTransform,
                             avx512::winograd4x4OutputTransform, avx512::winograd4x4GradOutputTransform,
                             avx512::winograd4x4GradInputTransform>(avx2);
  return level >= cpu::Level::Avx512 ? wide : avx2;
}

const WinogradVariant& winograd4x4() {
  static const WinogradVariant& variant = winograd4x4AtLevel(cpu::activeLevel());
  return variant;
}

}  // namespace dtrain::ops
