// Every CPU level's 2x2 stride-2 max pooling against a scalar loop: the same
// maxima, the same argmax (the first maximum of the window in row order,
// a NaN winning, the last one of several), and a backward that writes every input element (the
// gradient at its window's argmax, zero elsewhere, the uncovered last row and
// column of odd extents included). Pooling computes no new value, so the
// levels must agree exactly. Odd plane and row counts (the AVX-512 kernel
// takes two output rows a vector) and rows shorter and longer than a vector;
// memory past the outputs keeps its sentinel.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/pool_2x2.h"
#include "tests/backend/levels_here.h"

namespace dtrain {
namespace {

struct Extent {
  int64_t planes, h, w;
};

const Extent kExtents[] = {{3, 28, 28}, {5, 14, 14}, {1, 7, 7}, {4, 33, 35}, {2, 2, 2}, {3, 9, 40}};

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE("each level's 2x2 max pooling matches the scalar loop exactly, forward and backward") {
  std::mt19937 rng(21);
  // Few distinct values, so windows hold ties; a few NaNs.
  std::uniform_int_distribution<int> value(-3, 3), nan_one_in(0, 60);
  const float sentinel = -12345.0f;
  for (const Extent& e : kExtents) {
    CAPTURE(e.planes);
    CAPTURE(e.h);
    CAPTURE(e.w);
    const int64_t ho = e.h / 2, wo = e.w / 2, in = e.planes * e.h * e.w, out = e.planes * ho * wo;
    std::vector<float> x(in), dy(out);
    for (float& v : x) v = nan_one_in(rng) == 0 ? std::numeric_limits<float>::quiet_NaN() : float(value(rng));
    for (float& v : dy) v = float(value(rng)) + 0.5f;
    std::vector<float> want_y(out), want_dx(in, 0.0f);
    std::vector<int32_t> want_at(out);
    for (int64_t p = 0; p < e.planes; ++p)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          int32_t at = static_cast<int32_t>(2 * oy * e.w + 2 * ox);
          float best = x[p * e.h * e.w + at];
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
              const int32_t k = static_cast<int32_t>((2 * oy + i) * e.w + 2 * ox + j);
              const float v = x[p * e.h * e.w + k];
              if (v > best || std::isnan(v)) best = v, at = k;  // a later NaN wins too
            }
          const int64_t o = (p * ho + oy) * wo + ox;
          want_y[o] = best;
          want_at[o] = at;
          want_dx[p * e.h * e.w + at] = dy[o];
        }
    for (cpu::Level level : testing::levelsHere()) {
      CAPTURE(std::string(cpu::levelName(level)));
      std::vector<float> y(out + 40, sentinel), dx(in + 40, sentinel);
      std::vector<int32_t> at(out + 40, -7);
      REQUIRE(
          ops::detail::maxPool2x2ForwardAtLevel(level, x.data(), e.planes, e.h, e.w, y.data(), at.data()));
      int64_t wrong = 0;
      for (int64_t o = 0; o < out; ++o)
        if (!same(y[o], want_y[o]) || at[o] != want_at[o])
          if (wrong++ < 3)
            MESSAGE("output " << o << ": " << y[o] << " at " << at[o] << ", want " << want_y[o] << " at "
                              << want_at[o]);
      for (int64_t o = out; o < out + 40; ++o) wrong += y[o] != sentinel || at[o] != -7;
      CHECK(wrong == 0);
      REQUIRE(
          ops::detail::maxPool2x2BackwardAtLevel(level, dy.data(), at.data(), e.planes, e.h, e.w, dx.data()));
      wrong = 0;
      for (int64_t i = 0; i < in; ++i) wrong += !same(dx[i], want_dx[i]);
      for (int64_t i = in; i < in + 40; ++i) wrong += dx[i] != sentinel;
      CHECK(wrong == 0);
    }
  }
}

}  // namespace
}  // namespace dtrain
