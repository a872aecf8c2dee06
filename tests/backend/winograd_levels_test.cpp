// Every CPU level's Winograd F(4x4,3x3) activation transforms against the
// transforms computed in double from their matrices (winograd4x4.cpp), on
// planes of ResNet's and the cnn's sizes, odd extents, every padding, and odd
// plane counts (the AVX-512 kernels take planes two at a time). Each element
// is held to gamma_r times the sum of the |terms| it adds, where r is the
// most roundings any term meets on its way through the 1-D transforms
// (counted below for each): the bound every evaluation order meets, so a
// wrong lane, tile, plane or tail breaks it by orders of magnitude. Entries a
// transform must not write keep their sentinel.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cpu/winograd_levels.h"
#include "tests/backend/levels_here.h"

namespace dtrain {
namespace {

using cpu::Level;

constexpr double kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                              {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
constexpr double kAT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

// The levels here, the bf16 one aside (its fp32 transforms are the AVX-512 level's).
std::vector<Level> levelsHere() {
  std::vector<Level> out = testing::levelsHere();
  if (out.back() == Level::Avx512Bf16) out.pop_back();
  return out;
}

double gamma(int r) {
  const double u = std::ldexp(1.0, -24);
  return r * u / (1 - r * u);
}

struct Geometry {
  int64_t n, channels, h, w, pad;
};

struct Layout {
  ops::Window2d g;
  int64_t n, th, tw, t, ld, plane;
};

Layout layoutFor(const Geometry& k, int64_t rows) {
  ops::Window2d g;
  g.channels = k.channels, g.height = k.h, g.width = k.w, g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = k.pad;
  const ops::WinogradTiles tiles = ops::winograd4x4AtLevel(Level::Avx2).tiles(g);
  Layout l{g, k.n, tiles.rows, tiles.cols, tiles.perSample(), 0, 0};
  l.ld = k.n * l.t + 5;         // columns past the transforms' part stay untouched
  l.plane = rows * l.ld + 3;  // and so does the slack between planes
  return l;
}

const float kSentinel = std::numeric_limits<float>::quiet_NaN();

std::vector<float> randoms(std::mt19937& rng, int64_t count) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(count);
  for (float& e : x) e = u(rng);
  return x;
}

// Checks a transformed buffer: rows r, tile columns [0, n*t) against want
// within bound; every other entry kept its sentinel.
void checkTransformed(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& bound,
                      const Layout& l, int64_t rows) {
  int64_t wrong = 0, touched = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const int64_t in_plane = i % l.plane, r = in_plane / l.ld, col = in_plane % l.ld;
    const bool used = i / l.plane < 36 && r < rows && col < l.n * l.t;
    if (!used) {
      touched += !std::isnan(got[i]);
    } else if (!(std::fabs(got[i] - want[i]) <= bound[i])) {
      if (wrong++ < 3) MESSAGE("entry " << i << ": " << got[i] << " want " << want[i] << " +- " << bound[i]);
    }
  }
  CHECK(wrong == 0);
  CHECK(touched == 0);
}

void checkDense(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& bound) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= bound[i]))
      if (wrong++ < 3) MESSAGE("element " << i << ": " << got[i] << " want " << want[i] << " +- " << bound[i]);
  CHECK(wrong == 0);
}

const Geometry kGeometries[] = {
    {2, 3, 32, 32, 1},  // ResNet's first stage: 8 tiles a row, 6 planes
    {1, 5, 16, 16, 1},  // its second: 4 tiles a row, an odd plane count
    {3, 3, 8, 8, 1},    // its third: 2 tiles a row, 9 planes
    {2, 1, 28, 28, 1},  // the cnn's first convolution: one channel, planes pair across samples
    {1, 3, 14, 14, 1},  // its second
    {1, 4, 11, 13, 2},  // padding 2, clipped edge tiles
    {1, 3, 9, 70, 0},   // no padding, a row of three vectors
    {1, 2, 7, 45, 2},   // padding 2 across vectors
};

TEST_CASE("each level's Winograd 4x4 input transform is B^T d B within its rounding bound") {
  std::mt19937 rng(11);
  for (const Geometry& k : kGeometries) {
    CAPTURE(k.h);
    CAPTURE(k.w);
    const Layout l = layoutFor(k, k.channels);
    const std::vector<float> x = randoms(rng, k.n * k.channels * k.h * k.w);
    std::vector<double> want(36 * l.plane), bound(36 * l.plane);
    for (int64_t s = 0; s < k.n; ++s)
      for (int64_t c = 0; c < k.channels; ++c)
        for (int64_t ti = 0; ti < l.th; ++ti)
          for (int64_t tj = 0; tj < l.tw; ++tj) {
            double d[6][6];
            for (int i = 0; i < 6; ++i)
              for (int j = 0; j < 6; ++j) {
                const int64_t y = 4 * ti + i - k.pad, xx = 4 * tj + j - k.pad;
                d[i][j] = y >= 0 && y < k.h && xx >= 0 && xx < k.w ? x[((s * k.channels + c) * k.h + y) * k.w + xx] : 0;
              }
            for (int a = 0; a < 6; ++a)
              for (int b = 0; b < 6; ++b) {
                double sum = 0, mag = 0;
                for (int i = 0; i < 6; ++i)
                  for (int j = 0; j < 6; ++j) {
                    sum += kBT[a][i] * d[i][j] * kBT[b][j];
                    mag += std::fabs(kBT[a][i] * d[i][j] * kBT[b][j]);
                  }
                // B^T's rows: a term is scaled (1 rounding) and added at
                // most twice more (2), in each of the two passes.
                const int64_t at = (6 * a + b) * l.plane + c * l.ld + s * l.t + ti * l.tw + tj;
                want[at] = sum;
                bound[at] = gamma(6) * mag;
              }
          }
    for (Level level : levelsHere()) {
      CAPTURE(cpu::levelName(level));
      std::vector<float> v(36 * l.plane, kSentinel);
      ops::winograd4x4AtLevel(level).inputTransform(x.data(), k.n, l.g, v.data(), l.ld, l.plane);
      checkTransformed(v, want, bound, l, k.channels);
    }
  }
}

TEST_CASE("each level's Winograd 4x4 output transform is act(A^T m A + bias) within its rounding bound") {
  std::mt19937 rng(12);
  for (const Geometry& k : kGeometries)
    for (bool relu : {false, true}) {
      CAPTURE(k.h);
      CAPTURE(k.w);
      CAPTURE(relu);
      const int64_t filters = k.channels;
      const Layout l = layoutFor(k, filters);
      const int64_t ho = k.h + 2 * k.pad - 2, wo = k.w + 2 * k.pad - 2;
      const std::vector<float> m = randoms(rng, 36 * l.plane), bias = randoms(rng, filters);
      std::vector<double> want(k.n * filters * ho * wo), bound(want.size());
      for (int64_t s = 0; s < k.n; ++s)
        for (int64_t f = 0; f < filters; ++f)
          for (int64_t oy = 0; oy < ho; ++oy)
            for (int64_t ox = 0; ox < wo; ++ox) {
              const int64_t ti = oy / 4, tj = ox / 4, r = oy % 4, q = ox % 4;
              double sum = bias[f], mag = std::fabs(bias[f]);
              for (int a = 0; a < 6; ++a)
                for (int b = 0; b < 6; ++b) {
                  const double term =
                      kAT[r][a] * m[(6 * a + b) * l.plane + f * l.ld + s * l.t + ti * l.tw + tj] * kAT[q][b];
                  sum += term;
                  mag += std::fabs(term);
                }
              // Three roundings a pass (A^T's sums of pairs, then of the
              // pairs), and the bias; relu moves no value closer to 0 than it was.
              const int64_t at = ((s * filters + f) * ho + oy) * wo + ox;
              want[at] = relu ? std::max(sum, 0.0) : sum;
              bound[at] = gamma(7) * mag;
            }
      for (Level level : levelsHere()) {
        CAPTURE(cpu::levelName(level));
        std::vector<float> y(want.size(), kSentinel);
        ops::winograd4x4AtLevel(level).outputTransform(m.data(), l.ld, l.plane, k.n, filters, l.g, bias.data(), relu,
                                                       y.data());
        checkDense(y, want, bound);
      }
    }
}

TEST_CASE("each level's Winograd 4x4 output-gradient transform is A dy A^T within its rounding bound") {
  std::mt19937 rng(13);
  for (const Geometry& k : kGeometries)
    for (bool relu : {false, true}) {
      CAPTURE(k.h);
      CAPTURE(k.w);
      CAPTURE(relu);
      const int64_t filters = k.channels;
      const Layout l = layoutFor(k, filters);
      const int64_t ho = k.h + 2 * k.pad - 2, wo = k.w + 2 * k.pad - 2;
      const std::vector<float> dy = randoms(rng, k.n * filters * ho * wo), out = randoms(rng, dy.size());
      std::vector<double> want(36 * l.plane), bound(36 * l.plane);
      for (int64_t s = 0; s < k.n; ++s)
        for (int64_t f = 0; f < filters; ++f)
          for (int64_t ti = 0; ti < l.th; ++ti)
            for (int64_t tj = 0; tj < l.tw; ++tj) {
              double g[4][4];
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                  const int64_t oy = 4 * ti + i, ox = 4 * tj + j, at = ((s * filters + f) * ho + oy) * wo + ox;
                  g[i][j] = oy < ho && ox < wo && (!relu || out[at] > 0) ? dy[at] : 0;
                }
              for (int a = 0; a < 6; ++a)
                for (int b = 0; b < 6; ++b) {
                  double sum = 0, mag = 0;
                  for (int i = 0; i < 4; ++i)
                    for (int j = 0; j < 4; ++j) {
                      const double term = kAT[i][a] * g[i][j] * kAT[j][b];
                      sum += term;
                      mag += std::fabs(term);
                    }
                  // A's rows: two roundings a pass (a sum of pairs, then of two).
                  const int64_t at = (6 * a + b) * l.plane + f * l.ld + s * l.t + ti * l.tw + tj;
                  want[at] = sum;
                  bound[at] = gamma(4) * mag;
                }
            }
      for (Level level : levelsHere()) {
        CAPTURE(cpu::levelName(level));
        std::vector<float> z(36 * l.plane, kSentinel);
        ops::winograd4x4AtLevel(level).gradOutputTransform(dy.data(), relu ? out.data() : nullptr, k.n, filters, l.g,
                                                           z.data(), l.ld, l.plane);
        checkTransformed(z, want, bound, l, filters);
      }
    }
}

TEST_CASE("each level's Winograd 4x4 input-gradient transform adds B dv B^T of every tile within its rounding bound") {
  std::mt19937 rng(14);
  for (const Geometry& k : kGeometries) {
    CAPTURE(k.h);
    CAPTURE(k.w);
    const Layout l = layoutFor(k, k.channels);
    const std::vector<float> dv = randoms(rng, 36 * l.plane);
    std::vector<double> want(k.n * k.channels * k.h * k.w), mag(want.size());
    for (int64_t s = 0; s < k.n; ++s)
      for (int64_t c = 0; c < k.channels; ++c)
        for (int64_t ti = 0; ti < l.th; ++ti)
          for (int64_t tj = 0; tj < l.tw; ++tj)
            for (int i = 0; i < 6; ++i)
              for (int j = 0; j < 6; ++j) {
                const int64_t y = 4 * ti + i - k.pad, x = 4 * tj + j - k.pad;
                if (y < 0 || y >= k.h || x < 0 || x >= k.w) continue;
                const int64_t at = ((s * k.channels + c) * k.h + y) * k.w + x;
                for (int a = 0; a < 6; ++a)
                  for (int b = 0; b < 6; ++b) {
                    const double term =
                        kBT[a][i] * dv[(6 * a + b) * l.plane + c * l.ld + s * l.t + ti * l.tw + tj] * kBT[b][j];
                    want[at] += term;
                    mag[at] += std::fabs(term);
                  }
              }
    // Three roundings a pass (B's rows scale once and add twice), then the
    // sums of the up to four overlapping tiles' contributions (three more).
    std::vector<double> bound(mag.size());
    for (size_t i = 0; i < mag.size(); ++i) bound[i] = gamma(9) * mag[i];
    for (Level level : levelsHere()) {
      CAPTURE(cpu::levelName(level));
      std::vector<float> dx(want.size(), kSentinel);
      ops::winograd4x4AtLevel(level).gradInputTransform(dv.data(), l.ld, l.plane, k.n, l.g, dx.data());
      checkDense(dx, want, bound);
    }
  }
}

}  // namespace
}  // namespace dtrain
