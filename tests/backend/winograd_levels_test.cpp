// Every CPU level's Winograd activation transforms, F(2x2,3x3) and
// F(4x4,3x3), against the transforms computed in double from their matrices
// (winograd.cpp, winograd4x4.cpp), on
// planes of ResNet's and the cnn's sizes, odd extents, every padding, and odd
// plane counts (the AVX-512 kernels take planes two at a time). Each element
// is held to gamma_r times the sum of the |terms| it adds, where r is the
// most roundings any term meets on its way through the 1-D transforms
// (counted below for each): the bound every evaluation order meets, so a
// wrong lane, tile, plane or tail breaks it by orders of magnitude. Entries a
// transform must not write keep their sentinel.
#include "core/backend/cpu/winograd_levels.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/backend/cpu/cpu_level.h"
#include "tests/backend/levels_here.h"

namespace dtrain {
namespace {

using cpu::Level;

// A variant's matrices (B^T is alpha x alpha, A^T tile x alpha, alpha = tile + 2)
// and the most roundings a term meets in each transform, counted from the
// kernels' formulas: per 1-D pass, a scaling by a constant that is not a
// power of two, and each addition after the term joins a partial sum.
struct Variant {
  const char* name;
  const ops::WinogradVariant& (*at)(Level);
  int tile, alpha;
  double bt[6][6], at_[4][6];
  int input, output, grad_output, grad_input;
};

const Variant kVariants[] = {
    {"F(2x2,3x3)",
     ops::winograd2x2AtLevel,
     2,
     4,
     {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
     {{1, 1, 1, 0}, {0, 1, -1, -1}},
     // input: one addition a pass; output: two a pass, then the bias;
     // output gradient: one a pass; input gradient: two a pass, then three
     // as the up to four overlapping tiles' contributions are summed.
     2,
     5,
     2,
     7},
    {"F(4x4,3x3)",
     ops::winograd4x4AtLevel,
     4,
     6,
     {{4, 0, -5, 0, 1, 0},
      {0, -4, -4, 1, 1, 0},
      {0, 4, -4, -1, 1, 0},
      {0, -2, -1, 2, 1, 0},
      {0, 2, -1, -2, 1, 0},
      {0, 4, 0, -5, 0, 1}},
     {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
     // input: a scaling and two additions a pass; output: three additions a
     // pass, then the bias; output gradient: two a pass; input gradient:
     // three a pass, then three for the overlapping tiles.
     6,
     7,
     4,
     9},
};

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
  int64_t n, th, tw, t, ld, plane, ho, wo;
};

Layout layoutFor(const Variant& v, const Geometry& k, int64_t rows) {
  ops::Window2d g;
  g.channels = k.channels, g.height = k.h, g.width = k.w, g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = k.pad;
  const ops::WinogradTiles tiles = v.at(Level::Avx2).tiles(g);
  Layout l{g, k.n, tiles.rows, tiles.cols, tiles.perSample(), 0, 0, g.outHeight(), g.outWidth()};
  l.ld = k.n * l.t + 5;       // columns past the transforms' part stay untouched
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
// Checks a transformed buffer: planes [0, elements), rows r, tile columns
// [0, n*t) against want within bound; every other entry kept its sentinel.
void checkTransformed(const std::vector<float>& got, const std::vector<double>& want,
                      const std::vector<double>& bound, const Layout& l, int64_t rows, int64_t elements) {
  int64_t wrong = 0, touched = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const int64_t in_plane = i % l.plane, r = in_plane / l.ld, col = in_plane % l.ld;
    const bool used = i / l.plane < elements && r < rows && col < l.n * l.t;
    if (!used) {
      touched += !std::isnan(got[i]);
    } else if (!(std::fabs(got[i] - want[i]) <= bound[i])) {
      if (wrong++ < 3) MESSAGE("entry " << i << ": " << got[i] << " want " << want[i] << " +- " << bound[i]);
    }
  }
  CHECK(wrong == 0);
  CHECK(touched == 0);
}

void checkDense(const std::vector<float>& got, const std::vector<double>& want,
                const std::vector<double>& bound) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= bound[i]))
      if (wrong++ < 3)
        MESSAGE("element " << i << ": " << got[i] << " want " << want[i] << " +- " << bound[i]);
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

TEST_CASE("each level's Winograd input transform is B^T d B within its rounding bound") {
  std::mt19937 rng(11);
  for (const Variant& v : kVariants)
    for (const Geometry& k : kGeometries) {
      CAPTURE(v.name);
      CAPTURE(k.h);
      CAPTURE(k.w);
      const Layout l = layoutFor(v, k, k.channels);
      const int al = v.alpha, elements = al * al;
      const std::vector<float> x = randoms(rng, k.n * k.channels * k.h * k.w);
      std::vector<double> want(elements * l.plane), bound(elements * l.plane);
      for (int64_t s = 0; s < k.n; ++s)
        for (int64_t c = 0; c < k.channels; ++c)
          for (int64_t ti = 0; ti < l.th; ++ti)
            for (int64_t tj = 0; tj < l.tw; ++tj) {
              double d[6][6];
              for (int i = 0; i < al; ++i)
                for (int j = 0; j < al; ++j) {
                  const int64_t y = v.tile * ti + i - k.pad, xx = v.tile * tj + j - k.pad;
                  d[i][j] = y >= 0 && y < k.h && xx >= 0 && xx < k.w
                                ? x[((s * k.channels + c) * k.h + y) * k.w + xx]
                                : 0;
                }
              for (int a = 0; a < al; ++a)
                for (int b = 0; b < al; ++b) {
                  double sum = 0, mag = 0;
                  for (int i = 0; i < al; ++i)
                    for (int j = 0; j < al; ++j) {
                      const double term = v.bt[a][i] * d[i][j] * v.bt[b][j];
                      sum += term;
                      mag += std::fabs(term);
                    }
                  const int64_t at = (al * a + b) * l.plane + c * l.ld + s * l.t + ti * l.tw + tj;
                  want[at] = sum;
                  bound[at] = gamma(v.input) * mag;
                }
            }
      for (Level level : levelsHere()) {
        CAPTURE(cpu::levelName(level));
        std::vector<float> out(elements * l.plane, kSentinel);
        v.at(level).inputTransform(x.data(), k.n, l.g, out.data(), l.ld, l.plane);
        checkTransformed(out, want, bound, l, k.channels, elements);
      }
    }
}

TEST_CASE("each level's Winograd output transform is act(A^T m A + bias) within its rounding bound") {
  std::mt19937 rng(12);
  for (const Variant& v : kVariants)
    for (const Geometry& k : kGeometries)
      for (bool relu : {false, true}) {
        CAPTURE(v.name);
        CAPTURE(k.h);
        CAPTURE(k.w);
        CAPTURE(relu);
        const int64_t filters = k.channels;
        const Layout l = layoutFor(v, k, filters);
        const int al = v.alpha;
        const std::vector<float> m = randoms(rng, al * al * l.plane), bias = randoms(rng, filters);
        std::vector<double> want(k.n * filters * l.ho * l.wo), bound(want.size());
        for (int64_t s = 0; s < k.n; ++s)
          for (int64_t f = 0; f < filters; ++f)
            for (int64_t oy = 0; oy < l.ho; ++oy)
              for (int64_t ox = 0; ox < l.wo; ++ox) {
                const int64_t ti = oy / v.tile, tj = ox / v.tile, r = oy % v.tile, q = ox % v.tile;
                double sum = bias[f], mag = std::fabs(bias[f]);
                for (int a = 0; a < al; ++a)
                  for (int b = 0; b < al; ++b) {
                    const double term = v.at_[r][a] *
                                        m[(al * a + b) * l.plane + f * l.ld + s * l.t + ti * l.tw + tj] *
                                        v.at_[q][b];
                    sum += term;
                    mag += std::fabs(term);
                  }
                // relu moves no value closer to 0 than it was.
                const int64_t at = ((s * filters + f) * l.ho + oy) * l.wo + ox;
                want[at] = relu ? std::max(sum, 0.0) : sum;
                bound[at] = gamma(v.output) * mag;
              }
        for (Level level : levelsHere()) {
          CAPTURE(cpu::levelName(level));
          std::vector<float> y(want.size(), kSentinel);
          v.at(level).outputTransform(m.data(), l.ld, l.plane, k.n, filters, l.g, bias.data(), relu,
                                      y.data());
          checkDense(y, want, bound);
        }
      }
}

TEST_CASE("each level's Winograd output-gradient transform is A dy A^T within its rounding bound") {
  std::mt19937 rng(13);
  for (const Variant& v : kVariants)
    for (const Geometry& k : kGeometries)
      for (bool relu : {false, true}) {
        CAPTURE(v.name);
        CAPTURE(k.h);
        CAPTURE(k.w);
        CAPTURE(relu);
        const int64_t filters = k.channels;
        const Layout l = layoutFor(v, k, filters);
        const int al = v.alpha, elements = al * al;
        const std::vector<float> dy = randoms(rng, k.n * filters * l.ho * l.wo),
                                 out = randoms(rng, dy.size());
        std::vector<double> want(elements * l.plane), bound(elements * l.plane);
        for (int64_t s = 0; s < k.n; ++s)
          for (int64_t f = 0; f < filters; ++f)
            for (int64_t ti = 0; ti < l.th; ++ti)
              for (int64_t tj = 0; tj < l.tw; ++tj) {
                double g[4][4];
                for (int i = 0; i < v.tile; ++i)
                  for (int j = 0; j < v.tile; ++j) {
                    const int64_t oy = v.tile * ti + i, ox = v.tile * tj + j,
                                  at = ((s * filters + f) * l.ho + oy) * l.wo + ox;
                    g[i][j] = oy < l.ho && ox < l.wo && (!relu || out[at] > 0) ? dy[at] : 0;
                  }
                for (int a = 0; a < al; ++a)
                  for (int b = 0; b < al; ++b) {
                    double sum = 0, mag = 0;
                    for (int i = 0; i < v.tile; ++i)
                      for (int j = 0; j < v.tile; ++j) {
                        const double term = v.at_[i][a] * g[i][j] * v.at_[j][b];
                        sum += term;
                        mag += std::fabs(term);
                      }
                    const int64_t at = (al * a + b) * l.plane + f * l.ld + s * l.t + ti * l.tw + tj;
                    want[at] = sum;
                    bound[at] = gamma(v.grad_output) * mag;
                  }
              }
        for (Level level : levelsHere()) {
          CAPTURE(cpu::levelName(level));
          std::vector<float> z(elements * l.plane, kSentinel);
          v.at(level).gradOutputTransform(dy.data(), relu ? out.data() : nullptr, k.n, filters, l.g, z.data(),
                                          l.ld, l.plane);
          checkTransformed(z, want, bound, l, filters, elements);
        }
      }
}

TEST_CASE(
    "each level's Winograd input-gradient transform adds B dv B^T of every tile within its rounding bound") {
  std::mt19937 rng(14);
  for (const Variant& v : kVariants)
    for (const Geometry& k : kGeometries) {
      CAPTURE(v.name);
      CAPTURE(k.h);
      CAPTURE(k.w);
      const Layout l = layoutFor(v, k, k.channels);
      const int al = v.alpha;
      const std::vector<float> dv = randoms(rng, al * al * l.plane);
      std::vector<double> want(k.n * k.channels * k.h * k.w), mag(want.size());
      for (int64_t s = 0; s < k.n; ++s)
        for (int64_t c = 0; c < k.channels; ++c)
          for (int64_t ti = 0; ti < l.th; ++ti)
            for (int64_t tj = 0; tj < l.tw; ++tj)
              for (int i = 0; i < al; ++i)
                for (int j = 0; j < al; ++j) {
                  const int64_t y = v.tile * ti + i - k.pad, x = v.tile * tj + j - k.pad;
                  if (y < 0 || y >= k.h || x < 0 || x >= k.w) continue;
                  const int64_t at = ((s * k.channels + c) * k.h + y) * k.w + x;
                  for (int a = 0; a < al; ++a)
                    for (int b = 0; b < al; ++b) {
                      const double term = v.bt[a][i] *
                                          dv[(al * a + b) * l.plane + c * l.ld + s * l.t + ti * l.tw + tj] *
                                          v.bt[b][j];
                      want[at] += term;
                      mag[at] += std::fabs(term);
                    }
                }
      std::vector<double> bound(mag.size());
      for (size_t i = 0; i < mag.size(); ++i) bound[i] = gamma(v.grad_input) * mag[i];
      for (Level level : levelsHere()) {
        CAPTURE(cpu::levelName(level));
        std::vector<float> dx(want.size(), kSentinel);
        v.at(level).gradInputTransform(dv.data(), l.ld, l.plane, k.n, l.g, dx.data());
        checkDense(dx, want, bound);
      }
    }
}

}  // namespace
}  // namespace dtrain
