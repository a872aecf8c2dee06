// Causal self-attention on the CPU (core/backend/attention_ops.h) against a
// naive double-precision reference that forms each query row's full masked
// softmax: forward (out, lse) and backward (dqkv) for sequences shorter and
// longer than a block and not multiples of it; the reference's backward against
// central finite differences in double; causality bit for bit; the dropout
// mask's statistics, the kernel under dropout against the reference with the
// same mask, and a batch split by sample_offset giving identical bits; a 4096
// token sequence in the linear scratch; and attentionExp against std::exp.
//
// Tolerances. fp32's unit roundoff is u = 2^-24 = 6e-8. A score is a dot of
// head_dim <= 128 terms of N(0,1) values scaled by 1/sqrt(head_dim): its error
// is a few u * sqrt(head_dim) ~ 1e-6 absolute, which exp turns into the same
// relative error of each probability (attentionExp adds <= 2 ulp); the sums over
// keys (kLanes-wide, then gemm) add ~sqrt(n) u. So out, lse and the gradients
// (each normwise: the largest error over the largest reference magnitude, per
// output and per q / k / v part of dqkv) are expected near 1e-6; measured up to
// 8e-7, and 2e-6 absolute for seq 1's dq and dk, whose reference is exactly 0
// (dS = p (dp - D) cancels). The checks ask for 1e-4: room for other gemm
// kernels' summation orders (oneDNN at the AVX-512 levels) and longer rows,
// and still far below a real fault (a causal mask one key off errs by ~1/seq,
// a dropped term or a wrong mask by O(1)).
#include "core/backend/attention_ops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace dtrain {
namespace {

using ops::AttentionDropout;
using ops::AttentionShape;

constexpr double kTol = 1e-4;

int64_t widthC(const AttentionShape& s) { return s.heads * s.head_dim; }

std::vector<float> randomVector(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<double> toDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// ------------------------------------------------------ the reference --

// The factor the probability of (i, j) of head h of batch row b is multiplied by.
double maskFactor(const AttentionDropout& d, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (d.rate <= 0.0f) return 1.0;
  return ops::attentionKeep(d.seed, d.rate, d.sample_offset + b, h, i, j)
             ? 1.0 / (1.0 - static_cast<double>(d.rate))
             : 0.0;
}

struct RefIndex {
  const AttentionShape& s;
  int64_t q(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * s.seq + t) * 3 * widthC(s) + h * s.head_dim + d;
  }
  int64_t k(int64_t b, int64_t t, int64_t h, int64_t d) const { return q(b, t, h, d) + widthC(s); }
  int64_t v(int64_t b, int64_t t, int64_t h, int64_t d) const { return q(b, t, h, d) + 2 * widthC(s); }
  int64_t o(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * s.seq + t) * widthC(s) + h * s.head_dim + d;
  }
};

// The softmax probabilities p[0..i] of query row i (keys j <= i) and their lse.
double refRow(const AttentionShape& s, const std::vector<double>& qkv, int64_t b, int64_t h, int64_t i,
              std::vector<double>& p) {
  const RefIndex at{s};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  p.assign(static_cast<size_t>(i + 1), 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) dot += qkv[at.q(b, i, h, d)] * qkv[at.k(b, j, h, d)];
    p[j] = scale * dot;
    mx = std::max(mx, p[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[j] - mx);
  const double lse = mx + std::log(sum);
  for (int64_t j = 0; j <= i; ++j) p[j] = std::exp(p[j] - lse);
  return lse;
}

struct RefForward {
  std::vector<double> out, lse;
};

// Rows [row_begin, seq) of every (sample, head); the others stay 0.
RefForward refForward(const AttentionShape& s, const std::vector<double>& qkv, const AttentionDropout& drop,
                      int64_t row_begin = 0) {
  const RefIndex at{s};
  RefForward r;
  r.out.assign(static_cast<size_t>(s.batch * s.seq * widthC(s)), 0.0);
  r.lse.assign(static_cast<size_t>(s.batch * s.heads * s.seq), 0.0);
  std::vector<double> p;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = row_begin; i < s.seq; ++i) {
        r.lse[(b * s.heads + h) * s.seq + i] = refRow(s, qkv, b, h, i, p);
        for (int64_t j = 0; j <= i; ++j) {
          const double w = p[j] * maskFactor(drop, b, h, i, j);
          for (int64_t d = 0; d < s.head_dim; ++d) r.out[at.o(b, i, h, d)] += w * qkv[at.v(b, j, h, d)];
        }
      }
  return r;
}

// dqkv from the query rows [row_begin, seq): complete for dq of those rows and for
// dk, dv of keys j >= row_begin (only queries i >= j see key j).
std::vector<double> refBackward(const AttentionShape& s, const std::vector<double>& qkv,
                                const std::vector<double>& dout, const AttentionDropout& drop,
                                int64_t row_begin = 0) {
  const RefIndex at{s};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> g(qkv.size(), 0.0), p, dp;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = row_begin; i < s.seq; ++i) {
        refRow(s, qkv, b, h, i, p);
        dp.assign(p.size(), 0.0);
        double dsum = 0.0;  // sum_j p_j m_j dp_j
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < s.head_dim; ++d) dp[j] += dout[at.o(b, i, h, d)] * qkv[at.v(b, j, h, d)];
          dsum += p[j] * maskFactor(drop, b, h, i, j) * dp[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double m = maskFactor(drop, b, h, i, j);
          const double ds = p[j] * (m * dp[j] - dsum);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            g[at.q(b, i, h, d)] += scale * ds * qkv[at.k(b, j, h, d)];
            g[at.k(b, j, h, d)] += scale * ds * qkv[at.q(b, i, h, d)];
            g[at.v(b, j, h, d)] += p[j] * m * dout[at.o(b, i, h, d)];
          }
        }
      }
  return g;
}

// ------------------------------------------------------ the kernel --

struct Result {
  std::vector<float> out, lse, dqkv;
};

Result runKernel(const AttentionShape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                 const AttentionDropout& drop) {
  Result r;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN everywhere first: every element must be written.
  r.out.assign(static_cast<size_t>(s.batch * s.seq * widthC(s)), nan);
  r.lse.assign(static_cast<size_t>(s.batch * s.heads * s.seq), nan);
  r.dqkv.assign(qkv.size(), nan);
  std::vector<float> scratch(static_cast<size_t>(ops::attentionScratchFloats(s)), nan);
  ops::causalAttentionForward(s, qkv.data(), r.out.data(), r.lse.data(), drop, scratch.data());
  if (!dout.empty())
    ops::causalAttentionBackward(s, qkv.data(), r.out.data(), dout.data(), r.lse.data(), r.dqkv.data(), drop,
                                 scratch.data());
  return r;
}

// The largest |got - ref| over the elements selected, divided by the largest |ref| there
// (at least `floor`): the normwise relative error the tolerance bounds.
template <class Select>
double relErr(const std::vector<float>& got, const std::vector<double>& ref, Select select,
              double floor = 0.0) {
  double err = 0.0, scale = floor;
  for (size_t e = 0; e < ref.size(); ++e) {
    if (!select(static_cast<int64_t>(e))) continue;
    const double diff = std::fabs(static_cast<double>(got[e]) - ref[e]);
    err = std::isnan(got[e]) ? std::numeric_limits<double>::infinity() : std::max(err, diff);
    scale = std::max(scale, std::fabs(ref[e]));
    if (std::isinf(err)) break;
  }
  return scale > 0.0 ? err / scale : err;
}

double relErr(const std::vector<float>& got, const std::vector<double>& ref) {
  return relErr(got, ref, [](int64_t) { return true; });
}

// The normwise errors of dqkv's q, k and v parts, each against its own scale.
void checkGrad(const AttentionShape& s, const std::vector<float>& got, const std::vector<double>& ref,
               double tol) {
  const int64_t c = widthC(s);
  for (int64_t part = 0; part < 3; ++part) {
    CAPTURE(part);
    const double err = relErr(got, ref, [&](int64_t e) { return (e % (3 * c)) / c == part; });
    CHECK(err <= tol);
  }
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ------------------------------------------------------------ tests --

TEST_CASE("attentionExp is within 2 ulp of exp on [-87, 1], exactly 1 at 0 and 0 below -87") {
  double worst = 0.0;
  auto check = [&](float x) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ops::attentionExp(x) - ref) / ref);
  };
  for (int64_t k = 0; k <= 8800000; ++k) check(-87.0f + static_cast<float>(k) * 1e-5f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-87.0f, 1.0f);
  for (int k = 0; k < 1000000; ++k) check(uniform(rng));
  for (int64_t k = 0; k < 2000000; ++k) check(-1e-3f + static_cast<float>(k) * 1e-9f);  // near 0, densely
  // Two ulp of a float in [1, 2) is 2^-22 relative at most.
  CHECK(worst <= std::ldexp(1.0, -22));
  CHECK(ops::attentionExp(0.0f) == 1.0f);
  CHECK(ops::attentionExp(-87.5f) == 0.0f);
  CHECK(ops::attentionExp(-1000.0f) == 0.0f);
  CHECK(ops::attentionExp(-std::numeric_limits<float>::infinity()) == 0.0f);
}

TEST_CASE("attention forward and backward match a double reference across block edges") {
  std::mt19937 rng(11);
  const int64_t kSeqs[] = {1, 7, 65, 130, 200};
  const int64_t kDims[] = {32, 64, 128};
  for (int64_t head_dim : kDims)
    for (int64_t seq : kSeqs) {
      const AttentionShape s{2, seq, head_dim == 64 ? 3 : 2, head_dim};
      CAPTURE(seq);
      CAPTURE(head_dim);
      const std::vector<float> qkv = randomVector(s.batch * s.seq * 3 * widthC(s), rng);
      const std::vector<float> dout = randomVector(s.batch * s.seq * widthC(s), rng);
      const AttentionDropout none;
      const Result got = runKernel(s, qkv, dout, none);
      const RefForward ref = refForward(s, toDouble(qkv), none);
      CHECK(relErr(got.out, ref.out) <= kTol);
      // lse is log(seq) + O(1): its errors are absolute ones, so its scale is at least 1.
      CHECK(relErr(
                got.lse, ref.lse, [](int64_t) { return true; }, 1.0) <= kTol);
      checkGrad(s, got.dqkv, refBackward(s, toDouble(qkv), toDouble(dout), none), kTol);
    }
}

// L = sum(out * R) in double, and its gradient by central differences.
std::vector<double> finiteDifferences(const AttentionShape& s, std::vector<double> qkv,
                                      const std::vector<double>& r, const AttentionDropout& drop) {
  auto loss = [&]() {
    const RefForward f = refForward(s, qkv, drop);
    double l = 0.0;
    for (size_t e = 0; e < r.size(); ++e) l += f.out[e] * r[e];
    return l;
  };
  const double step = 1e-5;
  std::vector<double> g(qkv.size());
  for (size_t e = 0; e < qkv.size(); ++e) {
    const double x = qkv[e];
    qkv[e] = x + step;
    const double up = loss();
    qkv[e] = x - step;
    const double down = loss();
    qkv[e] = x;
    g[e] = (up - down) / (2 * step);
  }
  return g;
}

TEST_CASE("the reference backward matches finite differences in double, and the kernel matches it") {
  std::mt19937 rng(17);
  const AttentionShape s{2, 5, 2, 4};
  const AttentionDropout kDrops[] = {AttentionDropout{}, AttentionDropout{0.5f, 99, 3}};
  for (const AttentionDropout& drop : kDrops) {
    CAPTURE(drop.rate);
    const std::vector<float> qkv = randomVector(s.batch * s.seq * 3 * widthC(s), rng);
    const std::vector<float> r = randomVector(s.batch * s.seq * widthC(s), rng);
    const std::vector<double> analytic = refBackward(s, toDouble(qkv), toDouble(r), drop);
    const std::vector<double> numeric = finiteDifferences(s, toDouble(qkv), toDouble(r), drop);
    // Step 1e-5: truncation ~1e-10 and cancellation ~1e-11 against values of order 1.
    double err = 0.0, scale = 0.0;
    for (size_t e = 0; e < analytic.size(); ++e) {
      err = std::max(err, std::fabs(analytic[e] - numeric[e]));
      scale = std::max(scale, std::fabs(numeric[e]));
    }
    CHECK(scale > 0.1);
    CHECK(err <= 1e-8 * scale);
    const Result got = runKernel(s, qkv, r, drop);
    CHECK(relErr(got.out, refForward(s, toDouble(qkv), drop).out) <= kTol);
    checkGrad(s, got.dqkv, analytic, kTol);
  }
}

TEST_CASE("changing a later token leaves every earlier output bit-identical") {
  std::mt19937 rng(23);
  const AttentionShape s{2, 130, 2, 32};
  const AttentionDropout kDrops[] = {AttentionDropout{}, AttentionDropout{0.25f, 5, 0}};
  for (const AttentionDropout& drop : kDrops)
    for (int64_t t : {int64_t{0}, int64_t{63}, int64_t{64}, int64_t{70}, int64_t{129}}) {
      CAPTURE(t);
      CAPTURE(drop.rate);
      std::vector<float> qkv = randomVector(s.batch * s.seq * 3 * widthC(s), rng);
      const Result before = runKernel(s, qkv, {}, drop);
      for (int64_t e = 0; e < 3 * widthC(s); ++e) qkv[static_cast<size_t>(t * 3 * widthC(s) + e)] += 3.0f;
      const Result after = runKernel(s, qkv, {}, drop);
      const size_t row = static_cast<size_t>(widthC(s));
      // Sample 0: rows before t unchanged, row t changed; sample 1 untouched.
      CHECK(std::memcmp(before.out.data(), after.out.data(), static_cast<size_t>(t) * row * sizeof(float)) ==
            0);
      CHECK(std::memcmp(before.out.data() + t * row, after.out.data() + t * row, row * sizeof(float)) != 0);
      const size_t sample = static_cast<size_t>(s.seq) * row;
      CHECK(std::memcmp(before.out.data() + sample, after.out.data() + sample, sample * sizeof(float)) == 0);
      for (int64_t h = 0; h < s.heads; ++h) {
        const float* lb = before.lse.data() + h * s.seq;
        const float* la = after.lse.data() + h * s.seq;
        CHECK(std::memcmp(lb, la, static_cast<size_t>(t) * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("the attention dropout mask keeps 1 - rate of the elements, independently across rows and heads") {
  const int64_t kRows = 512;
  for (float rate : {0.5f, 0.1f}) {
    CAPTURE(rate);
    int64_t n = 0, kept = 0, same_head = 0, same_sample = 0, same_row = 0;
    for (int64_t sample = 0; sample < 4; ++sample)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t i = 0; i < kRows; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            const bool k = ops::attentionKeep(42, rate, sample, h, i, j);
            ++n;
            kept += k;
            same_head += k == ops::attentionKeep(42, rate, sample, h + 1, i, j);
            same_sample += k == ops::attentionKeep(42, rate, sample + 1, h, i, j);
            same_row += k == ops::attentionKeep(42, rate, sample, h, i + 1, j);
          }
    // Binomial fractions: 6 standard deviations (n = 2.1M, sigma <= 3.5e-4).
    const double keep = 1.0 - rate, sd = std::sqrt(keep * rate / static_cast<double>(n));
    const double agree = keep * keep + rate * rate;  // two independent masks agreeing
    const double sd_agree = std::sqrt(agree * (1 - agree) / static_cast<double>(n));
    CHECK(std::fabs(static_cast<double>(kept) / n - keep) <= 6 * sd);
    CHECK(std::fabs(static_cast<double>(same_head) / n - agree) <= 6 * sd_agree);
    CHECK(std::fabs(static_cast<double>(same_sample) / n - agree) <= 6 * sd_agree);
    CHECK(std::fabs(static_cast<double>(same_row) / n - agree) <= 6 * sd_agree);
  }
  // A different seed, a different mask.
  int64_t differ = 0;
  for (int64_t j = 0; j < 1000; ++j)
    differ += ops::attentionKeep(1, 0.5f, 0, 0, 999, j) != ops::attentionKeep(2, 0.5f, 0, 0, 999, j);
  CHECK(differ > 400);
  CHECK(differ < 600);
}

TEST_CASE("attention under dropout matches the reference with the same mask") {
  std::mt19937 rng(29);
  for (int64_t seq : {int64_t{7}, int64_t{130}}) {
    for (float rate : {0.5f, 0.1f}) {
      CAPTURE(seq);
      CAPTURE(rate);
      const AttentionShape s{2, seq, 3, 64};
      const AttentionDropout drop{rate, 1234, 7};
      const std::vector<float> qkv = randomVector(s.batch * s.seq * 3 * widthC(s), rng);
      const std::vector<float> dout = randomVector(s.batch * s.seq * widthC(s), rng);
      const Result got = runKernel(s, qkv, dout, drop);
      const RefForward ref = refForward(s, toDouble(qkv), drop);
      CHECK(relErr(got.out, ref.out) <= kTol);
      CHECK(relErr(
                got.lse, ref.lse, [](int64_t) { return true; }, 1.0) <= kTol);
      checkGrad(s, got.dqkv, refBackward(s, toDouble(qkv), toDouble(dout), drop), kTol);
      // The mask matters: without dropout the output is far from this one.
      CHECK(relErr(got.out, refForward(s, toDouble(qkv), AttentionDropout{}).out) > 0.1);
    }
  }
}

TEST_CASE("a batch split in two calls by sample_offset gives the bits of one call") {
  std::mt19937 rng(31);
  const AttentionShape whole{4, 77, 2, 32};
  AttentionShape half = whole;
  half.batch = 2;
  const AttentionDropout drop{0.3f, 77, 10};
  const std::vector<float> qkv = randomVector(whole.batch * whole.seq * 3 * widthC(whole), rng);
  const std::vector<float> dout = randomVector(whole.batch * whole.seq * widthC(whole), rng);
  const Result one = runKernel(whole, qkv, dout, drop);
  const size_t qkv_half = qkv.size() / 2, out_half = dout.size() / 2;
  const Result first = runKernel(half, std::vector<float>(qkv.begin(), qkv.begin() + qkv_half),
                                 std::vector<float>(dout.begin(), dout.begin() + out_half), drop);
  AttentionDropout second_drop = drop;
  second_drop.sample_offset += 2;
  const Result second = runKernel(half, std::vector<float>(qkv.begin() + qkv_half, qkv.end()),
                                  std::vector<float>(dout.begin() + out_half, dout.end()), second_drop);
  auto joined = [](const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<float> j(a);
    j.insert(j.end(), b.begin(), b.end());
    return j;
  };
  CHECK(sameBits(one.out, joined(first.out, second.out)));
  CHECK(sameBits(one.lse, joined(first.lse, second.lse)));
  CHECK(sameBits(one.dqkv, joined(first.dqkv, second.dqkv)));
  // The second half's mask is not the first half's.
  const Result unshifted = runKernel(half, std::vector<float>(qkv.begin() + qkv_half, qkv.end()),
                                     std::vector<float>(dout.begin() + out_half, dout.end()), drop);
  CHECK(!sameBits(second.out, unshifted.out));
}

TEST_CASE("a 4096-token sequence runs forward and backward in scratch linear in seq") {
  std::mt19937 rng(37);
  const AttentionShape s{1, 4096, 2, 64};
  const int64_t floats = ops::attentionScratchFloats(s);
  CHECK(floats < 2 * 4096 * 128);  // two blocks of 64 query rows, far below seq^2 = 16.8M
  const std::vector<float> qkv = randomVector(s.batch * s.seq * 3 * widthC(s), rng);
  const std::vector<float> dout = randomVector(s.batch * s.seq * widthC(s), rng);
  // The scratch exactly as large as asked, with guard values after it.
  const int64_t guard = 1024;
  std::vector<float> scratch(static_cast<size_t>(floats + guard), 0.0f);
  std::fill(scratch.begin() + floats, scratch.end(), 12345.0f);
  std::vector<float> out(dout.size()), lse(static_cast<size_t>(s.heads * s.seq)), dqkv(qkv.size());
  const AttentionDropout none;
  ops::causalAttentionForward(s, qkv.data(), out.data(), lse.data(), none, scratch.data());
  ops::causalAttentionBackward(s, qkv.data(), out.data(), dout.data(), lse.data(), dqkv.data(), none,
                               scratch.data());
  CHECK(std::all_of(scratch.begin() + floats, scratch.end(), [](float x) { return x == 12345.0f; }));
  // The reference for the last 96 query rows: their out, lse and dq, and the
  // complete dk and dv of keys 4000.. (only those rows see them).
  const int64_t first = 4000;
  const RefForward ref = refForward(s, toDouble(qkv), none, first);
  const std::vector<double> ref_grad = refBackward(s, toDouble(qkv), toDouble(dout), none, first);
  const int64_t c = widthC(s);
  CHECK(relErr(out, ref.out, [&](int64_t e) { return e / c >= first; }) <= kTol);
  CHECK(relErr(
            lse, ref.lse, [&](int64_t e) { return e % s.seq >= first; }, 1.0) <= kTol);
  for (int64_t part = 0; part < 3; ++part) {
    CAPTURE(part);
    const double err =
        relErr(dqkv, ref_grad, [&](int64_t e) { return e / (3 * c) >= first && (e % (3 * c)) / c == part; });
    CHECK(err <= kTol);
  }
  // Over all keys: each row's dS sums to 0, so sum_j dk_j = 0; its P sums to 1, so
  // sum_j dv_j = sum_i dout_i. Summed in double, against the sum of magnitudes.
  for (int64_t col = 0; col < c; ++col) {
    double dk = 0.0, dk_abs = 0.0, dv = 0.0, dv_abs = 0.0, dsum = 0.0;
    for (int64_t t = 0; t < s.seq; ++t) {
      dk += dqkv[static_cast<size_t>(t * 3 * c + c + col)];
      dk_abs += std::fabs(dqkv[static_cast<size_t>(t * 3 * c + c + col)]);
      dv += dqkv[static_cast<size_t>(t * 3 * c + 2 * c + col)];
      dv_abs += std::fabs(dqkv[static_cast<size_t>(t * 3 * c + 2 * c + col)]);
      dsum += dout[static_cast<size_t>(t * c + col)];
    }
    CHECK(std::fabs(dk) <= kTol * dk_abs);
    CHECK(std::fabs(dv - dsum) <= kTol * dv_abs);
  }
}

}  // namespace
}  // namespace dtrain
