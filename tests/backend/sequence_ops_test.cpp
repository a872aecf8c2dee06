// The sequence-model passes (core/backend/sequence_ops.h) against double-
// precision references: GELU and its derivative over a dense sweep of [-10, 10]
// and random values, within the bounds derived in cpu/sequence_ops.cpp, with
// tails of every length, NaN and infinities, and the gradient written over dy;
// layer normalisation forward and backward on rows of 1, 7, 384 and 1000
// columns, one with a mean of 1000, within tolerances derived from the float
// arithmetic of the lane sums (below, beside each check).
#include "core/backend/sequence_ops.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace dtrain {
namespace {

const double kEps = std::ldexp(1.0, -24);  // float's unit roundoff
const double kGeluK = std::sqrt(2.0 / 3.14159265358979323846);
const double kGeluC = 0.044715;

// gelu(v) = v (1 + tanh u) / 2 and gelu'(v) as geluBackward writes it,
// (1 + tanh u) / 2 + v (1 - tanh^2 u) / 2 * sqrt(2/pi) (1 + 3 * 0.044715 v^2),
// in double through the same identities as the kernel ((1 + tanh u) / 2 =
// sigmoid(2u), (1 - tanh^2 u) / 4 = sigmoid(2u) sigmoid(-2u)): equal to the
// formulas, and without their cancellation in double where tanh u is near -1.
struct GeluRef {
  double y, d;
};

GeluRef geluRef(double v) {
  const double z = 2.0 * kGeluK * (v + kGeluC * v * v * v);
  const double e = std::exp(-std::fabs(z));
  const double big = 1.0 / (1.0 + e), small = e / (1.0 + e);
  const double s = z >= 0.0 ? big : small;
  return {v * s, s + 2.0 * kGeluK * v * (1.0 + 3.0 * kGeluC * v * v) * big * small};
}

// The bounds derived in cpu/sequence_ops.cpp, in units of kEps: gelu within
// 6 |gelu| + 1.51, gelu' within 9 |gelu'| + 6.3, and dx = dy gelu' one
// rounding more; with 1% for the second-order terms the derivation drops, and
// 1e-36 for values below the exp's range (|2u| > 87), which come out 0.
bool geluForwardOk(float v, float y) {
  const double ref = geluRef(v).y;
  return std::fabs(y - ref) <= 1.01 * (6.0 * std::fabs(ref) + 1.51) * kEps + 1e-36;
}

bool geluBackwardOk(float v, float dy, float dx) {
  const double ref = geluRef(v).d;
  return std::fabs(dx - dy * ref) <= 1.01 * std::fabs(dy) * (10.0 * std::fabs(ref) + 6.3) * kEps + 1e-36;
}

// [-10, 10] in steps of 2^-10 (exact floats), then normal(0, 3) values.
std::vector<float> geluInputs(std::mt19937& rng) {
  std::vector<float> x;
  for (int i = -10 * 1024; i <= 10 * 1024; ++i) x.push_back(static_cast<float>(i) / 1024.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 100000; ++i) x.push_back(normal(rng));
  return x;
}

TEST_CASE("gelu: forward within 6 eps |gelu| + 1.51 eps of the double formula") {
  std::mt19937 rng(1);
  const std::vector<float> x = geluInputs(rng);
  std::vector<float> y(x.size());
  ops::geluForward(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t bad = 0;
  double worst_rel = 0.0;  // where |gelu| >= 0.1: the relative bound alone
  for (size_t i = 0; i < x.size(); ++i) {
    if (!geluForwardOk(x[i], y[i]) && ++bad <= 5) CHECK_MESSAGE(false, "x = " << x[i] << " y = " << y[i]);
    const double ref = geluRef(x[i]).y;
    if (std::fabs(ref) >= 0.1) worst_rel = std::max(worst_rel, std::fabs(y[i] - ref) / std::fabs(ref) / kEps);
  }
  CHECK(bad == 0);
  MESSAGE("worst relative error where |gelu| >= 0.1: " << worst_rel << " eps");
  CHECK(worst_rel <= 1.01 * (6.0 + 1.51 / 0.1));
}

TEST_CASE("gelu: backward within |dy| (10 eps |gelu'| + 6.3 eps) of the double formula, also over dy") {
  std::mt19937 rng(2);
  const std::vector<float> x = geluInputs(rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dy(x.size()), dx(x.size());
  for (float& v : dy) v = normal(rng);
  ops::geluBackward(x.data(), dy.data(), dx.data(), static_cast<int64_t>(x.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!geluBackwardOk(x[i], dy[i], dx[i]) && ++bad <= 5)
      CHECK_MESSAGE(false, "x = " << x[i] << " dy = " << dy[i] << " dx = " << dx[i]);
  CHECK(bad == 0);
  // dx written over dy: the same values, bit for bit.
  std::vector<float> inplace = dy;
  ops::geluBackward(x.data(), inplace.data(), inplace.data(), static_cast<int64_t>(x.size()));
  CHECK(std::memcmp(inplace.data(), dx.data(), dx.size() * sizeof(float)) == 0);
}

TEST_CASE("gelu: an element's result does not depend on where it falls (vector body or tail)") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(64), dy(64), y(64), dx(64);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    dy[i] = normal(rng);
  }
  ops::geluForward(x.data(), y.data(), 64);
  ops::geluBackward(x.data(), dy.data(), dx.data(), 64);
  for (int64_t offset : {0, 1, 3}) {
    for (int64_t n = 1; n <= 40; ++n) {
      std::vector<float> ys(static_cast<size_t>(n)), dxs(static_cast<size_t>(n));
      ops::geluForward(x.data() + offset, ys.data(), n);
      ops::geluBackward(x.data() + offset, dy.data() + offset, dxs.data(), n);
      CHECK(std::memcmp(ys.data(), y.data() + offset, ys.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(dxs.data(), dx.data() + offset, dxs.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("gelu: NaN gives NaN; +inf passes, huge values take the limits") {
  const float inf = INFINITY;
  const float x[] = {NAN, inf, 1e30f, -1e30f, -inf, 0.0f, -0.0f, 1.0f};
  const float dy[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, NAN};
  float y[8], dx[8];
  ops::geluForward(x, y, 8);
  ops::geluBackward(x, dy, dx, 8);
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(dx[0]));
  CHECK(y[1] == inf);
  CHECK(dx[1] == 2.0f);  // gelu' -> 1
  CHECK(y[2] == 1e30f);
  CHECK(dx[2] == 3.0f);
  CHECK(y[3] == 0.0f);
  CHECK(dx[3] == 0.0f);     // gelu' -> 0
  CHECK(std::isnan(y[4]));  // -inf * 0, as the formula: -inf (1 + tanh(-inf)) / 2
  CHECK(dx[4] == 0.0f);
  CHECK(y[5] == 0.0f);
  CHECK(!std::signbit(y[5]));
  CHECK(std::signbit(y[6]));
  CHECK(dx[5] == 3.0f);  // gelu'(0) = 1/2
  CHECK(dx[6] == 3.5f);
  CHECK(std::isnan(dx[7]));
}

// ------------------------------------------------------- layer normalisation --

struct Rows {
  int64_t rows, cols;
  std::vector<float> x, gamma, beta;
};

// `rows` random rows (normal, means and scales varying by row), the last one
// 1000 + normal(0, 0.02) when `large_mean`; gamma and beta random.
Rows makeRows(int64_t rows, int64_t cols, bool large_mean, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Rows d{rows, cols, {}, {}, {}};
  for (int64_t r = 0; r < rows; ++r) {
    const bool big = large_mean && r == rows - 1;
    const float centre = big ? 1000.0f : 0.5f * static_cast<float>(r % 3) - 0.5f;
    const float scale = big ? 0.02f : 0.5f + 0.75f * static_cast<float>(r % 4);
    for (int64_t c = 0; c < cols; ++c) d.x.push_back(centre + scale * normal(rng));
  }
  for (int64_t c = 0; c < cols; ++c) {
    d.gamma.push_back(1.0f + 0.5f * normal(rng));
    d.beta.push_back(0.25f * normal(rng));
  }
  return d;
}

// Lane sums of cpu/sequence_ops.cpp: each of its 16 lanes adds at most this many values.
double laneTerms(int64_t cols) { return static_cast<double>((cols + 15) / 16); }

// Forward's tolerances, with k = laneTerms(cols), n = cols, e = kEps, first
// order. The provisional mean m0 (lane sum rounded to float) is off by
// |D| <= k e mean|x|. Mean: the deviations x - m0 (rounding e) summed on
// lanes (k - 1 more), the result rounded to float:
//   |mean - mu| <= e |mu| + k e mean|x - m0|,  mean|x - m0| <= mean|x - mu| + |D|.
// Variance: the squares (2 e with the deviation's rounding) on lanes:
//   sum(d^2) within (k + 1) e of sum((x - m0)^2) = n (var + D^2); minus
//   (sum(d) / n)^2, within 2 |D| k e mean|x - m0|; rstd = 1/sqrt(var + eps)
//   then within half the relative error of var + eps, plus e for the float.
// y = (x - mean) rstd gamma + beta: three roundings on (x - mean) rstd gamma,
// one on y, besides the errors of mean and rstd.
TEST_CASE("layer_norm: forward within float-derived tolerances of a double reference") {
  std::mt19937 rng(4);
  const float eps = 1e-5f;
  for (int64_t cols : {1, 7, 384, 1000}) {
    CAPTURE(cols);
    const Rows d = makeRows(5, cols, true, rng);
    std::vector<float> y(d.x.size()), mean(5), rstd(5);
    ops::layerNormForward(d.x.data(), d.rows, cols, d.gamma.data(), d.beta.data(), eps, y.data(), mean.data(),
                          rstd.data());
    const double k = laneTerms(cols), n = static_cast<double>(cols);
    for (int64_t r = 0; r < d.rows; ++r) {
      CAPTURE(r);
      const float* xr = d.x.data() + r * cols;
      double mu = 0.0, abs_x = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        mu += xr[c];
        abs_x += std::fabs(xr[c]);
      }
      mu /= n;
      abs_x /= n;
      double var = 0.0, abs_dev = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        var += (xr[c] - mu) * (xr[c] - mu);
        abs_dev += std::fabs(xr[c] - mu);
      }
      var /= n;
      abs_dev /= n;
      const double rs = 1.0 / std::sqrt(var + eps);
      const double shift = k * kEps * abs_x;  // |D|
      const double tol_mean = kEps * std::fabs(mu) + k * kEps * (abs_dev + shift);
      const double var_err =
          (k + 1) * kEps * (var + shift * shift) + 2 * shift * k * kEps * (abs_dev + shift);
      const double rel_rstd = 0.5 * var_err / (var + eps) + kEps;
      CHECK(std::fabs(mean[r] - mu) <= 1.01 * tol_mean + 1e-30);
      CHECK(std::fabs(rstd[r] - rs) <= 1.01 * rel_rstd * rs);
      int64_t bad = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double ref = (xr[c] - mu) * rs * d.gamma[c] + d.beta[c];
        const double t = std::fabs(d.gamma[c]) * rs;
        const double tol =
            t * (tol_mean + std::fabs(xr[c] - mu) * (rel_rstd + 3 * kEps)) + kEps * std::fabs(ref);
        if (!(std::fabs(y[r * cols + c] - ref) <= 1.01 * tol + 1e-30) && ++bad <= 3)
          CHECK_MESSAGE(false,
                        "c = " << c << " y = " << y[r * cols + c] << " ref = " << ref << " tol = " << tol);
      }
      CHECK(bad == 0);
    }
    // The large-mean row normalises to unit variance (eps is 1e-5 against 4e-4).
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (d.x[4 * cols + c] - mean[4]) * static_cast<double>(rstd[4]);
      sq += xhat * xhat;
    }
    if (cols > 1) CHECK(sq / n == doctest::Approx(1.0).epsilon(0.05));
  }
}

// Backward from the forward's mean and rstd (m, s below, as given), the
// reference in double from the same: xhat = (x - m) s, g = dy gamma, with k,
// e as above. The float xhat is within 2 e |xhat|, g within e |g|; the lane
// sums: mean(g) within k e mean|g| + e |mean(g)|, mean(g xhat) within
// (k + 2) e mean|g xhat| + e |mean(g xhat)|. dx = s (g - mean(g) - xhat
// mean(g xhat)) then takes four more roundings, so
//   |dx - ref| <= s e (2|g| + 2|mean(g)| + k mean|g| + |xhat| (k + 2)
//                 mean|g xhat| + 4 |xhat mean(g xhat)|) + 2 e |ref|.
// dgamma and dbeta: rows added one at a time to the existing value, each
// term within 3 e (dgamma) or exact (dbeta), each add rounding by e of the
// running sum: within (rows + 3) e (|start| + sum |terms|).
TEST_CASE("layer_norm: backward within float-derived tolerances; dgamma and dbeta accumulate") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {1, 7, 384, 1000}) {
    CAPTURE(cols);
    const int64_t rows = 5;
    const Rows d = makeRows(rows, cols, true, rng);
    std::vector<float> y(d.x.size()), mean(rows), rstd(rows), dy(d.x.size()), dx(d.x.size());
    ops::layerNormForward(d.x.data(), rows, cols, d.gamma.data(), d.beta.data(), 1e-5f, y.data(), mean.data(),
                          rstd.data());
    for (float& v : dy) v = normal(rng);
    std::vector<float> dgamma(static_cast<size_t>(cols)), dbeta(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      dgamma[c] = 0.5f * normal(rng);
      dbeta[c] = 0.5f * normal(rng);
    }
    const std::vector<float> dgamma0 = dgamma, dbeta0 = dbeta;
    ops::layerNormBackward(d.x.data(), dy.data(), rows, cols, d.gamma.data(), mean.data(), rstd.data(),
                           dx.data(), dgamma.data(), dbeta.data());

    const double k = laneTerms(cols), n = static_cast<double>(cols);
    std::vector<double> dg_ref(dgamma0.begin(), dgamma0.end()), db_ref(dbeta0.begin(), dbeta0.end());
    std::vector<double> dg_abs(dg_ref.size()), db_abs(db_ref.size());
    for (int64_t c = 0; c < cols; ++c) {
      dg_abs[c] = std::fabs(dg_ref[c]);
      db_abs[c] = std::fabs(db_ref[c]);
    }
    for (int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      const double m = mean[r], s = rstd[r];
      const int64_t o = r * cols;
      double g_mean = 0.0, gx_mean = 0.0, g_abs = 0.0, gx_abs = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (d.x[o + c] - m) * s, g = static_cast<double>(dy[o + c]) * d.gamma[c];
        g_mean += g;
        gx_mean += g * xhat;
        g_abs += std::fabs(g);
        gx_abs += std::fabs(g * xhat);
        dg_ref[c] += dy[o + c] * xhat;
        db_ref[c] += dy[o + c];
        dg_abs[c] += std::fabs(dy[o + c] * xhat);
        db_abs[c] += std::fabs(dy[o + c]);
      }
      g_mean /= n;
      gx_mean /= n;
      g_abs /= n;
      gx_abs /= n;
      int64_t bad = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (d.x[o + c] - m) * s, g = static_cast<double>(dy[o + c]) * d.gamma[c];
        const double ref = s * (g - g_mean - xhat * gx_mean);
        const double tol = s * kEps *
                               (2 * std::fabs(g) + 2 * std::fabs(g_mean) + k * g_abs +
                                std::fabs(xhat) * (k + 2) * gx_abs + 4 * std::fabs(xhat * gx_mean)) +
                           2 * kEps * std::fabs(ref);
        if (!(std::fabs(dx[o + c] - ref) <= 1.01 * tol + 1e-30) && ++bad <= 3)
          CHECK_MESSAGE(false, "c = " << c << " dx = " << dx[o + c] << " ref = " << ref << " tol = " << tol);
      }
      CHECK(bad == 0);
    }
    for (int64_t c = 0; c < cols; ++c) {
      CAPTURE(c);
      CHECK(std::fabs(dgamma[c] - dg_ref[c]) <= 1.01 * (rows + 3) * kEps * dg_abs[c]);
      CHECK(std::fabs(dbeta[c] - db_ref[c]) <= 1.01 * rows * kEps * db_abs[c]);
    }

    // Without dx: the same parameter gradients.
    std::vector<float> dgamma2 = dgamma0, dbeta2 = dbeta0;
    ops::layerNormBackward(d.x.data(), dy.data(), rows, cols, d.gamma.data(), mean.data(), rstd.data(),
                           nullptr, dgamma2.data(), dbeta2.data());
    CHECK(dgamma2 == dgamma);
    CHECK(dbeta2 == dbeta);
  }
}

}  // namespace
}  // namespace dtrain
