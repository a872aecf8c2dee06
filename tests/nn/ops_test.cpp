// Direct tests of ops not fully covered through the layers: softmax
// cross-entropy (value, gradient, accuracy count, stability, label errors)
// and the im2col/col2im adjoint pair.
#include "core/backend/ops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("softmaxCrossEntropy: loss, gradient and correct count") {
  const int64_t n = 3, classes = 4;
  const std::vector<float> logits = {1.0f,  2.0f, 3.0f,  4.0f,  // argmax 3
                                     0.5f,  0.5f, -1.0f, 0.0f,  // tie 0/1: first wins
                                     -2.0f, 7.0f, 1.0f,  0.0f};
  const std::vector<int32_t> labels = {3, 1, 1};
  std::vector<float> d(n * classes);
  int64_t correct = 5;  // incremented, not overwritten
  const double loss =
      ops::softmaxCrossEntropy(logits.data(), labels.data(), n, classes, 0.5f, d.data(), &correct);
  double expected = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(logits[r * classes + c]));
    expected += std::log(sum) - logits[r * classes + labels[r]];
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(logits[r * classes + c])) / sum;
      CHECK(d[r * classes + c] == doctest::Approx(0.5 * (p - (c == labels[r]))).epsilon(1e-6));
    }
  }
  CHECK(loss == doctest::Approx(expected).epsilon(1e-12));
  CHECK(correct == 5 + 2);  // rows 0 and 2; row 1's first maximum is class 0
}

TEST_CASE("softmaxCrossEntropy: gradient matches finite differences") {
  // Smooth loss: central differences with eps = 1e-3 have truncation error
  // O(eps^2) ~ 1e-6 and round-off (double loss, float logits) ~ 1e-4 relative.
  Rng rng(31);
  const int64_t n = 5, classes = 7;
  std::vector<float> z(n * classes), d(n * classes);
  for (float& v : z) v = 2.0f * rng.normal();
  std::vector<int32_t> labels = {0, 6, 3, 3, 2};
  ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, d.data(), nullptr);
  const float eps = 1e-3f;
  for (size_t i = 0; i < z.size(); ++i) {
    const float saved = z[i];
    z[i] = saved + eps;
    const double plus = ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr);
    z[i] = saved - eps;
    const double minus =
        ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr);
    z[i] = saved;
    CHECK(d[i] == doctest::Approx((plus - minus) / (2.0 * eps)).epsilon(2e-3).scale(1.0));
  }
}

TEST_CASE("softmaxCrossEntropy: stable for large logits") {
  const std::vector<float> z = {1000.0f, 1001.0f, -1000.0f};
  const int32_t label = 0;
  float d[3];
  const double loss = ops::softmaxCrossEntropy(z.data(), &label, 1, 3, 1.0f, d, nullptr);
  CHECK(std::isfinite(loss));
  CHECK(loss == doctest::Approx(std::log1p(std::exp(1.0))).epsilon(1e-9));
  CHECK(d[0] == doctest::Approx(1.0 / (1.0 + std::exp(1.0)) - 1.0).epsilon(1e-6));
  CHECK(d[2] == 0.0f);
}

TEST_CASE("softmaxCrossEntropy: out-of-range labels throw, naming label and classes") {
  const std::vector<float> z(6, 0.0f);
  for (int32_t bad : {10, -1}) {
    const std::vector<int32_t> labels = {1, bad};
    std::vector<float> d(6, 42.0f);
    try {
      ops::softmaxCrossEntropy(z.data(), labels.data(), 2, 3, 1.0f, d.data(), nullptr);
      FAIL("no error");
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find("label " + std::to_string(bad)) != std::string::npos);
      CHECK(msg.find("3 classes") != std::string::npos);
    }
    CHECK(d[0] == 42.0f);  // nothing written
  }
}

TEST_CASE("col2im is the adjoint of im2col") {
  // <im2col(x), c> == <x, col2im(c)> for any x and c.
  Rng rng(32);
  const ops::Window2d geoms[] = {
      {3, 7, 6, 3, 2, 2, 1, 1, 0}, {2, 5, 5, 3, 3, 1, 1, 2, 2}, {1, 4, 9, 2, 4, 3, 2, 1, 1}};
  for (const ops::Window2d& g : geoms) {
    const int64_t rows = g.channels * g.kernel_h * g.kernel_w, cols = g.outPlane();
    Tensor x = Tensor::empty(Shape{g.channels, g.height, g.width}), c = Tensor::empty(Shape{rows, cols});
    rng.fill(x);
    rng.fill(c);
    Tensor colx = Tensor::empty(c.shape()), dx = Tensor::empty(x.shape());
    dx.fill(1e9f);  // col2im must write every element
    ops::im2col(x.data(), g, colx.data());
    ops::col2im(c.data(), g, dx.data());
    CHECK(dotLoss(colx, c) == doctest::Approx(dotLoss(x, dx)).epsilon(1e-5));
  }
}

TEST_CASE("gemmUnpacked matches gemm") {
  Rng rng(33);
  struct Shape3 {
    int64_t m, n, k;
  };
  // Row counts around the 6-row block, column counts around the 16-column slice.
  const Shape3 shapes[] = {{64, 245, 32}, {32, 200, 64}, {7, 17, 9}, {1, 5, 3}, {13, 16, 1}, {6, 33, 20}};
  for (const Shape3& s : shapes)
    for (bool trans : {false, true}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(trans);
      const int64_t lda = (trans ? s.m : s.k) + 3, ldb = s.n + 5, ldc = (s.n + 15) / 16 * 16 + 2;
      Tensor a = Tensor::empty(Shape{trans ? s.k : s.m, lda}), b = Tensor::empty(Shape{s.k, ldb});
      rng.fill(a);
      rng.fill(b);
      Tensor c = Tensor::empty(Shape{s.m, ldc}), ref = Tensor::empty(Shape{s.m, ldc});
      c.fill(7.0f);
      ops::gemm(trans, false, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, ref.data(), ldc);
      ops::gemmUnpacked(trans, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), ldc);
      double worst = 0.0;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          worst = std::max(worst, std::fabs(double(c.data()[i * ldc + j]) - ref.data()[i * ldc + j]));
      CHECK(worst < 1e-4);
      // With the epilogue: a per-row bias, then relu.
      Tensor bias = Tensor::empty(Shape{s.m});
      rng.fill(bias);
      ops::gemmUnpacked(trans, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), ldc, bias.data(), true);
      worst = 0.0;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          const double expected = std::max(0.0, double(ref.data()[i * ldc + j]) + bias.data()[i]);
          worst = std::max(worst, std::fabs(double(c.data()[i * ldc + j]) - expected));
        }
      CHECK(worst < 1e-4);
      // Nothing past column n is touched.
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = s.n; j < ldc; ++j) CHECK(c.data()[i * ldc + j] == 7.0f);
    }
}

TEST_CASE("weightGradRows matches a direct sum, with and without the relu mask and bias") {
  Rng rng(34);
  for (int64_t m : {1, 2, 5, 32})
    for (int64_t n : {1, 4, 9, 11})
      for (int64_t p : {3, 8, 29, 784})
        for (bool relu : {false, true}) {
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(p);
          CAPTURE(relu);
          Tensor dy = Tensor::empty(Shape{m, p}), y = Tensor::empty(Shape{m, p}),
                 col = Tensor::empty(Shape{n, p});
          rng.fill(dy);
          rng.fill(y);
          rng.fill(col);
          Tensor dw = Tensor::empty(Shape{m, n}), db = Tensor::empty(Shape{m});
          dw.fill(0.5f);  // accumulated into
          db.fill(-1.0f);
          ops::weightGradRows(dy.data(), relu ? y.data() : nullptr, m, p, col.data(), n, dw.data(),
                              db.data());
          double worst = 0.0;
          for (int64_t i = 0; i < m; ++i) {
            double bsum = -1.0;
            for (int64_t j = 0; j < n; ++j) {
              double s = 0.5;
              for (int64_t t = 0; t < p; ++t) {
                const double g = relu && !(y.data()[i * p + t] > 0.0f) ? 0.0 : dy.data()[i * p + t];
                s += g * col.data()[j * p + t];
                if (j == 0) bsum += g;
              }
              worst = std::max(worst, std::fabs(s - dw.data()[i * n + j]) / (1.0 + std::fabs(s)));
            }
            worst = std::max(worst, std::fabs(bsum - db.data()[i]) / (1.0 + std::fabs(bsum)));
          }
          // Float sums of up to 784 products against a double reference.
          CHECK(worst < 1e-4);
        }
}

TEST_CASE("softmaxCrossEntropy: label smoothing loss against the smoothed target, gradient by differences") {
  Rng rng(37);
  const int64_t n = 4, classes = 5;
  const float s = 0.1f;
  std::vector<float> z(n * classes), d(n * classes);
  for (float& v : z) v = 1.5f * rng.normal();
  std::vector<int32_t> labels = {4, 0, 2, 2};
  int64_t correct = 0;
  const double loss =
      ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 0.25f, d.data(), &correct, s);
  // Reference: -sum_c q_c log p_c with q = 0.9 onehot + 0.02 everywhere.
  double expected = 0;
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[r * classes + c]));
    for (int64_t c = 0; c < classes; ++c) {
      const double q = (c == labels[r] ? 1.0 - s : 0.0) + s / classes;
      const double p = std::exp(static_cast<double>(z[r * classes + c])) / sum;
      expected -= q * std::log(p);
      CHECK(d[r * classes + c] == doctest::Approx((p - q) * 0.25).epsilon(1e-6).scale(1e-6));
    }
  }
  CHECK(loss == doctest::Approx(expected).epsilon(1e-7));
  // The smoothed loss is larger than the plain one for confident rows, and the
  // plain one is the smoothing-0 case exactly.
  CHECK(ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr, 0.0f) ==
        ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr));
  const float eps = 1e-3f;
  ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, d.data(), nullptr, s);
  for (size_t i = 0; i < z.size(); ++i) {
    const float saved = z[i];
    z[i] = saved + eps;
    const double plus =
        ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr, s);
    z[i] = saved - eps;
    const double minus =
        ops::softmaxCrossEntropy(z.data(), labels.data(), n, classes, 1.0f, nullptr, nullptr, s);
    z[i] = saved;
    CHECK(d[i] == doctest::Approx((plus - minus) / (2.0 * eps)).epsilon(2e-3).scale(1.0));
  }
}

TEST_CASE("tokenCrossEntropy: padding rows and padded vocabulary columns count for nothing") {
  // 4 rows of a vocabulary of 3 padded to a width of 5; row 2's label is padding.
  const int64_t rows = 4, width = 5, classes = 3;
  std::vector<float> logits(rows * width);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7) % 11) * 0.3f - 1.0f;
  const std::vector<int32_t> labels = {2, 0, -1, 1};
  std::vector<float> d(rows * width, 9.0f);
  int64_t correct = 0, counted = 0;
  const double loss = ops::tokenCrossEntropy(logits.data(), labels.data(), rows, width, classes, 0.25f,
                                             d.data(), &correct, &counted, 0.0f);
  CHECK(counted == 3);
  // The same rows as plain rows of the first 3 columns, the padded row left out.
  double want = 0.0;
  int64_t want_correct = 0;
  for (int64_t r : {0, 1, 3}) {
    std::vector<float> row(logits.begin() + r * width, logits.begin() + r * width + classes), dr(classes);
    want += ops::softmaxCrossEntropy(row.data(), &labels[static_cast<size_t>(r)], 1, classes, 0.25f,
                                     dr.data(), &want_correct);
    // Float exponentials (2 ulp) against softmaxCrossEntropy's double ones:
    // a gradient entry (p - q) * 0.25 within a few float steps of 0.25.
    for (int64_t c = 0; c < classes; ++c)
      CHECK(d[static_cast<size_t>(r * width + c)] ==
            doctest::Approx(dr[static_cast<size_t>(c)]).epsilon(1e-6).scale(1.0));
    for (int64_t c = classes; c < width; ++c) CHECK(d[static_cast<size_t>(r * width + c)] == 0.0f);
  }
  CHECK(loss == doctest::Approx(want).epsilon(1e-6));
  CHECK(correct == want_correct);
  for (int64_t c = 0; c < width; ++c) CHECK(d[static_cast<size_t>(2 * width + c)] == 0.0f);
  const std::vector<int32_t> bad = {3, 0, 0, 0};
  CHECK_THROWS_AS(ops::tokenCrossEntropy(logits.data(), bad.data(), rows, width, classes, 1.0f, nullptr,
                                         nullptr, nullptr, 0.0f),
                  Error);
}

TEST_CASE("tokenCrossEntropy: a GPT-2-sized row agrees with the double-precision loss") {
  // 50,257 logits of spread 3: the float exponentials' sums stay within a few
  // parts in 10^6 (64 terms a lane per block), the loss's log within ~1e-6.
  const int64_t classes = 50257;
  Rng rng(21);
  std::vector<float> z(static_cast<size_t>(classes));
  for (float& v : z) v = 3.0f * rng.normal();
  const int32_t label = 777;
  std::vector<float> d(z.size()), dr(z.size());
  int64_t correct = 0, counted = 0, correct_ref = 0;
  const double loss =
      ops::tokenCrossEntropy(z.data(), &label, 1, classes, classes, 1.0f, d.data(), &correct, &counted, 0.1f);
  const double want =
      ops::softmaxCrossEntropy(z.data(), &label, 1, classes, 1.0f, dr.data(), &correct_ref, 0.1f);
  CHECK(loss == doctest::Approx(want).epsilon(1e-6));
  CHECK(correct == correct_ref);
  double worst = 0.0;
  for (size_t c = 0; c < z.size(); ++c) worst = std::max(worst, std::fabs(static_cast<double>(d[c]) - dr[c]));
  CHECK(worst < 1e-6);  // the entries are probabilities (at most 1) less the target
}
