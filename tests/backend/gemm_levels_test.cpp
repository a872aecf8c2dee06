// Every CPU level's matrix products against a double-precision product and
// against each other, on random shapes with odd sizes and tails shorter than a
// vector. The bound is the one any fp32 summation order meets (Higham's
// gamma_n: n rounding steps, each within 2^-24 of its result) applied to the
// sum of |terms|, so it holds for OpenBLAS's, oneDNN's and dtrain's kernels
// alike, and a wrong element, lane or tail breaks it by orders of magnitude.
#include "core/backend/cpu/gemm_levels.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend/cpu/cpu_level.h"
#include "tests/backend/levels_here.h"

namespace dtrain {
namespace {

using cpu::Level;

using testing::levelsHere;

double gamma(int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  std::vector<float> a, b, c0;
  int64_t lda, ldb, ldc;
};

Problem randomProblem(std::mt19937& rng, bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Problem p{ta, tb, m, n, k, {}, {}, {}, 0, 0, 0};
  // Leading dimensions past the used width: the kernels must honour them.
  p.lda = (ta ? m : k) + 3;
  p.ldb = (tb ? k : n) + 5;
  p.ldc = n + 2;
  p.a.resize((ta ? k : m) * p.lda);
  p.b.resize((tb ? n : k) * p.ldb);
  p.c0.resize(m * p.ldc);
  for (float& x : p.a) x = u(rng);
  for (float& x : p.b) x = u(rng);
  for (float& x : p.c0) x = u(rng);
  return p;
}

float at(const std::vector<float>& x, bool t, int64_t ld, int64_t r, int64_t c) {
  return t ? x[c * ld + r] : x[r * ld + c];
}

// c = alpha a b + beta c0 at `level`; each element within its bound of the
// double product.
void checkGemm(const Problem& p, Level level, float alpha, float beta, std::vector<float>& c) {
  c = p.c0;
  ops::gemmAtLevel(level, p.ta, p.tb, p.m, p.n, p.k, alpha, p.a.data(), p.lda, p.b.data(), p.ldb, beta,
                   c.data(), p.ldc);
  int bad = 0;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double t = double(at(p.a, p.ta, p.lda, i, q)) * at(p.b, p.tb, p.ldb, q, j);
        exact += t;
        magnitude += std::fabs(t);
      }
      exact = alpha * exact + beta * double(p.c0[i * p.ldc + j]);
      const double bound =
          gamma(p.k + 2) * (std::fabs(alpha) * magnitude + std::fabs(beta * p.c0[i * p.ldc + j]));
      if (std::fabs(c[i * p.ldc + j] - exact) > bound && ++bad <= 3)
        FAIL_CHECK(cpu::levelName(level), " c[", i, ",", j, "] = ", c[i * p.ldc + j], ", exact ", exact,
                   ", bound ", bound);
    }
  CHECK(bad == 0);
  // Padding columns of c are never written.
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = p.n; j < p.ldc; ++j) CHECK(c[i * p.ldc + j] == p.c0[i * p.ldc + j]);
}

TEST_CASE("gemm: every level within the fp32 bound of a double product, on odd shapes") {
  std::mt19937 rng(7);
  const int64_t shapes[][3] = {{1, 1, 1},     {3, 17, 5},   {13, 31, 33},
                               {64, 10, 256}, {37, 515, 9}, {130, 66, 129}};
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Problem p = randomProblem(rng, ta, tb, s[0], s[1], s[2]);
        std::vector<float> c;
        for (Level level : levelsHere()) {
          CAPTURE(s[0]);
          CAPTURE(s[1]);
          CAPTURE(s[2]);
          CAPTURE(ta);
          CAPTURE(tb);
          checkGemm(p, level, 1.0f, 0.0f, c);
          checkGemm(p, level, -0.5f, 2.0f, c);
        }
      }
}

TEST_CASE("gemmUnpacked: every level within the fp32 bound, with bias and relu, tails of every width") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // m past and short of the 6- and 12-row blocks; n short of, at and past
  // the 16- and 32-column slices.
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {12, 32, 9}, {13, 33, 16}, {25, 47, 27}, {32, 100, 64}};
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool relu : {false, true}) {
        const int64_t m = s[0], n = s[1], k = s[2];
        const int64_t lda = (ta ? m : k) + 1, ldb = n + 3, ldc = n + 4;
        std::vector<float> a((ta ? k : m) * lda), b(k * ldb), bias(m);
        for (float& x : a) x = u(rng);
        for (float& x : b) x = u(rng);
        for (float& x : bias) x = u(rng);
        for (Level level : levelsHere()) {
          std::vector<float> c(m * ldc, 123.0f);
          ops::gemmUnpackedAtLevel(level, ta, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc,
                                   bias.data(), relu);
          int bad = 0;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double exact = bias[i], magnitude = std::fabs(bias[i]);
              for (int64_t q = 0; q < k; ++q) {
                const double t = double(at(a, ta, lda, i, q)) * b[q * ldb + j];
                exact += t;
                magnitude += std::fabs(t);
              }
              if (relu && exact < 0) exact = 0;
              if (std::fabs(c[i * ldc + j] - exact) > gamma(k + 1) * magnitude && ++bad <= 3)
                FAIL_CHECK(cpu::levelName(level), " m", m, " n", n, " k", k, " c[", i, ",", j,
                           "] = ", c[i * ldc + j], ", exact ", exact);
            }
            for (int64_t j = n; j < ldc; ++j) CHECK(c[i * ldc + j] == 123.0f);  // nothing past n written
          }
          CHECK(bad == 0);
        }
      }
}

TEST_CASE(
    "weightGradRows: every level within the fp32 bound, with the relu mask and bias, planes of every tail") {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Planes short of, at and past the 8- and 16-lane steps; 9 taps (one pass
  // of 10 rows of col), 3 and 23 (three passes, the last short).
  const int64_t shapes[][3] = {{2, 1, 1}, {3, 7, 9}, {4, 16, 3}, {5, 33, 23}, {6, 784, 9}};
  for (const auto& s : shapes)
    for (bool relu : {false, true}) {
      const int64_t m = s[0], p = s[1], n = s[2];
      std::vector<float> g(m * p), mask(m * p), col(n * p), dw0(m * n), db0(m);
      for (float& x : g) x = u(rng);
      for (float& x : mask) x = u(rng);
      for (float& x : col) x = u(rng);
      for (float& x : dw0) x = u(rng);
      for (float& x : db0) x = u(rng);
      for (Level level : levelsHere()) {
        std::vector<float> dw = dw0, db = db0;
        ops::weightGradRowsAtLevel(level, g.data(), relu ? mask.data() : nullptr, m, p, col.data(), n,
                                   dw.data(), db.data());
        int bad = 0;
        for (int64_t i = 0; i < m; ++i) {
          auto term = [&](int64_t t) { return relu && !(mask[i * p + t] > 0) ? 0.0 : double(g[i * p + t]); };
          // Accumulated in vector lanes, the lanes added, then the prior value: p + 1 roundings at most.
          for (int64_t j = 0; j < n; ++j) {
            double exact = dw0[i * n + j], magnitude = std::fabs(dw0[i * n + j]);
            for (int64_t t = 0; t < p; ++t) {
              exact += term(t) * col[j * p + t];
              magnitude += std::fabs(term(t) * col[j * p + t]);
            }
            if (std::fabs(dw[i * n + j] - exact) > gamma(p + 1) * magnitude && ++bad <= 3)
              FAIL_CHECK(cpu::levelName(level), " p", p, " dw[", i, ",", j, "] = ", dw[i * n + j], ", exact ",
                         exact);
          }
          double exact = db0[i], magnitude = std::fabs(db0[i]);
          for (int64_t t = 0; t < p; ++t) {
            exact += term(t);
            magnitude += std::fabs(term(t));
          }
          if (std::fabs(db[i] - exact) > gamma(p + 1) * magnitude && ++bad <= 3)
            FAIL_CHECK(cpu::levelName(level), " p", p, " dbias[", i, "] = ", db[i], ", exact ", exact);
        }
        CHECK(bad == 0);
      }
    }
}

}  // namespace
}  // namespace dtrain
