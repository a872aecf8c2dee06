#include "core/optim/grad_clip.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace dtrain;

TEST_CASE("sumOfSquares over a range, including tails shorter than a vector") {
  const std::vector<float> g = {3.0f, 4.0f, 0.0f, -1.0f, 2.0f};
  CHECK(sumOfSquares(g.data(), 0, 2) == 25.0);
  CHECK(sumOfSquares(g.data(), 0, 5) == 30.0);
  CHECK(sumOfSquares(g.data(), 3, 5) == 5.0);
  CHECK(sumOfSquares(g.data(), 2, 2) == 0.0);

  // 1..1001: sum of k^2 = n(n+1)(2n+1)/6, exact in double; ranges add up.
  std::vector<float> big(1001);
  for (int i = 0; i < 1001; ++i) big[i] = static_cast<float>(i + 1);
  const double n = 1001;
  CHECK(sumOfSquares(big.data(), 0, 1001) == n * (n + 1) * (2 * n + 1) / 6);
  CHECK(sumOfSquares(big.data(), 0, 333) + sumOfSquares(big.data(), 333, 1001) ==
        n * (n + 1) * (2 * n + 1) / 6);
}

TEST_CASE("sumOfSquares accumulates in double") {
  // 1e-4^2 = 1e-8 added 1e6 times: a float running sum would drift far from 0.01.
  std::vector<float> g(1000000, 1e-4f);
  const double x = static_cast<double>(1e-4f);
  CHECK(sumOfSquares(g.data(), 0, 1000000) == doctest::Approx(1e6 * x * x).epsilon(1e-12));
}

TEST_CASE("clipScale follows clip_grad_norm_") {
  CHECK(clipScale(25.0, 10.0) == 1.0f);  // norm 5 within 10
  // norm equal to max_norm: PyTorch still scales by max / (norm + 1e-6), a hair below 1
  CHECK(clipScale(25.0, 5.0) == static_cast<float>(5.0 / (5.0 + 1e-6)));
  CHECK(clipScale(25.0, 1.0) == static_cast<float>(1.0 / (5.0 + 1e-6)));  // norm 5 > 1
  CHECK(clipScale(1e6, 0.0) == 1.0f);                                     // 0 = clipping off
  CHECK(std::isnan(clipScale(std::numeric_limits<double>::quiet_NaN(), 1.0)));
  CHECK(clipScale(std::numeric_limits<double>::infinity(), 1.0) == 0.0f);
}

TEST_CASE("clipping a gradient brings its norm to max_norm") {
  std::vector<float> g = {3.0f, 4.0f, 0.0f, -12.0f};  // norm 13
  const float s = clipScale(sumOfSquares(g.data(), 0, 4), 6.5);
  scale(g.data(), 0, 2, s);
  scale(g.data(), 2, 4, s);
  CHECK(g[0] == doctest::Approx(1.5).epsilon(1e-6));
  CHECK(g[1] == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(g[2] == 0.0f);
  CHECK(g[3] == doctest::Approx(-6.0).epsilon(1e-6));
  CHECK(std::sqrt(sumOfSquares(g.data(), 0, 4)) == doctest::Approx(6.5).epsilon(1e-6));
}
