// One layer at a time, a bf16 or fp16 pass against the fp32 pass of the same
// parameters and inputs, within bounds derived from the formats:
//
// u = 2^-8 (bf16) or 2^-11 (fp16) is the unit round-off: rounding changes a
// value v by at most u|v| (+ eta = 2^-25 in fp16's subnormal range, a fixed
// half-step; bf16 has fp32's range and no such term that matters). fp32 sums
// of K terms err by at most g_K = K 2^-24 / (1 - K 2^-24) times the sum of
// the terms' magnitudes.
//
// Products (dense, conv2d): y = sum_k w_k x_k + b, with w, b and x rounded:
// each product changes by at most (2u + u^2)|w_k x_k| (+ eta (|w_k| + |x_k|)),
// so |y16 - y32| <= (2u + u^2) S + 2 g_K S + u |y16| / (1 - u) + 2 eta, where
// S = sum_k |w_k||x_k| + |b| is what the same layer computes from |w|, |x|
// and |b| (the "absolute" pass below); the last u term is the output's own
// rounding. The input gradient dx = W^T dy is bounded the same way from
// |W|^T |dy|; the weight gradient (fp32, unrounded) by (2u + u^2) S' + 2 g_N S'
// with S' = sum_n |dy_n||x_n|.
// relu: the value or 0, so |Δy| <= u|x| + eta; max pooling moves by at most
// the largest change of a value in its window, u max|x| + eta.
// Batch normalisation (fp32 statistics of rounded inputs x(1+d)): the
// deviations d_i = x_i - mean change by at most D = 2u max|x|, the standard
// deviation by at most D too (the RMS of those changes), so
// |Δy_i| <= |gamma| (|Δd_i| + |xhat_i| D) / (sigma - D) + u |y16| + eta.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/backend/ops.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "tests/common/layer_spec.h"
#include "tests/nn/nn_test_util.h"

namespace dtrain {
namespace {

using testing::layerSpec;

struct Format {
  Precision precision;
  double u, eta;
};
const Format kBf16{Precision::Bf16, std::ldexp(1.0, -8), 0.0};
const Format kFp16{Precision::Fp16, std::ldexp(1.0, -11), std::ldexp(1.0, -25)};

double gammaOf(int64_t k) {
  const double e = static_cast<double>(k) * std::ldexp(1.0, -24);
  return e / (1 - e);
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

// A one-layer model part reading "x" (a gradient wanted), in `precision`, on
// the given parameters, input and output gradient.
struct Pass {
  std::vector<float> y, dx, grads;
};

Pass runLayer(const LayerSpec& spec, const Shape& in_shape, int64_t batch, Precision precision,
              const std::vector<float>& params, const std::vector<float>& x, const std::vector<float>& dy) {
  ModelCut cut{{{"x", in_shape, true}}, {}, {}};
  LayerSpec s = spec;
  s.inputs = {"x"};
  Model model({s}, cut, builtinLayers(), LayerDefaults{});
  model.setPrecision(precision);
  ParamStore store;
  model.registerParams(store);
  store.allocate();
  std::copy(params.begin(), params.end(), store.params().data());
  ParamStore buffers;
  model.registerBuffers(buffers);
  buffers.allocate();
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, batch, buffers.size() > 0 ? &buffers : nullptr);
  Tensor input = Tensor::empty(in_shape.withBatch(batch));
  std::copy(x.begin(), x.end(), input.data());
  model.forward({&input}, LayerContext{});
  Pass p;
  p.y = values(*model.outputs().back());
  Tensor dout = Tensor::empty(model.outputShape().withBatch(batch));
  std::copy(dy.begin(), dy.end(), dout.data());
  Tensor dx = Tensor::zeros(input.shape());
  model.backward({&input}, {&dout}, {&dx}, LayerContext{});
  p.dx = values(dx);
  p.grads = values(grads);
  // The masters are the optimizer's: a 16-bit pass reads a rounded copy.
  for (size_t i = 0; i < params.size(); ++i) REQUIRE(store.params().data()[i] == params[i]);
  return p;
}

std::vector<float> rounded(const Format& f, std::vector<float> v) {
  ops::roundTo16Bits(halfFormatOf(f.precision), v.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

std::vector<float> absolute(std::vector<float> v) {
  for (float& a : v) a = std::fabs(a);
  return v;
}

double maxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float a : v) m = std::max(m, static_cast<double>(std::fabs(a)));
  return m;
}

// Each element of `got` within bound(i) of `want`; reports the worst ratio.
void checkWithin(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                 const std::function<double(size_t)>& bound) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double r = std::fabs(static_cast<double>(got[i]) - want[i]) / bound(i);
    if (r > worst) {
      worst = r;
      at = i;
    }
  }
  INFO(what, ": worst element ", at, " off by ", worst, " of its bound");
  CHECK(worst <= 1.0);
}

// Every value a 16-bit model stores between layers is the format's.
void checkRepresentable(const Format& f, const char* what, const std::vector<float>& v) {
  const std::vector<float> r = rounded(f, v);
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(what, "[", i, "] = ", v[i]);
    REQUIRE(r[i] == v[i]);
  }
}

// Distinct values 0.05 apart, none within 0.025 of zero, in random order: no
// relu kinks or pooling ties within a rounding of them.
std::vector<float> distinctValues(int64_t n, test::Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double k = static_cast<double>(i - n / 2);
    v[static_cast<size_t>(i)] = static_cast<float>(0.05 * k + (k >= 0 ? 0.025 : -0.025));
  }
  std::shuffle(v.begin(), v.end(), rng.engine());
  return v;
}

struct Case {
  LayerSpec spec;
  Shape in_shape;
  int64_t fan_in;  // terms per output sum (products)
};

void checkProduct(const Case& c, const Format& f) {
  const int64_t batch = 4;
  test::Rng rng(11);
  ModelCut cut{{{"x", c.in_shape, true}}, {}, {}};
  LayerSpec s = c.spec;
  s.inputs = {"x"};
  Model probe({s}, cut, builtinLayers(), LayerDefaults{});
  ParamStore store;
  probe.registerParams(store);
  store.allocate();
  std::vector<float> params(static_cast<size_t>(store.size())),
      x(static_cast<size_t>(c.in_shape.numel() * batch)),
      dy(static_cast<size_t>(probe.outputShape().numel() * batch));
  for (float& v : params) v = 0.3f * rng.normal();
  for (float& v : x) v = rng.normal();
  for (float& v : dy) v = rng.normal();

  const Pass p32 = runLayer(c.spec, c.in_shape, batch, Precision::Fp32, params, x, dy);
  // The 16-bit pass gets its input as an earlier layer would store it.
  const Pass p16 = runLayer(c.spec, c.in_shape, batch, f.precision, params, rounded(f, x), dy);
  const Pass pabs =
      runLayer(c.spec, c.in_shape, batch, Precision::Fp32, absolute(params), absolute(x), absolute(dy));
  const double u = f.u, g = gammaOf(std::max<int64_t>(c.fan_in, batch * 64));
  const double eta_terms =
      f.eta * static_cast<double>(c.fan_in) * (maxAbs(params) + maxAbs(x) + maxAbs(dy) + 1);
  auto bound = [&](const std::vector<float>& s, const std::vector<float>& out16, bool rounded_out) {
    return [&, rounded_out](size_t i) {
      return (2 * u + u * u + 2 * g) * s[i] + (rounded_out ? u / (1 - u) * std::fabs(out16[i]) : 0.0) +
             eta_terms + 2 * f.eta + 1e-30;
    };
  };
  checkWithin("forward", p16.y, p32.y, bound(pabs.y, p16.y, true));
  checkWithin("input gradient", p16.dx, p32.dx, bound(pabs.dx, p16.dx, true));
  checkWithin("parameter gradients", p16.grads, p32.grads, bound(pabs.grads, p16.grads, false));
  checkRepresentable(f, "output", p16.y);
  checkRepresentable(f, "input gradient", p16.dx);
  // Parameter gradients are fp32 sums, not rounded: most are no 16-bit value.
  const std::vector<float> r = rounded(f, p16.grads);
  int64_t exact = 0;
  for (size_t i = 0; i < r.size(); ++i) exact += r[i] == p16.grads[i];
  CHECK(exact < static_cast<int64_t>(r.size()) / 2);
}

TEST_CASE("dense and convolution passes in bf16 and fp16 stay within the formats' bounds of fp32") {
  const std::vector<Case> cases = {
      {layerSpec("d", "dense", {}, {{"units", int64_t{7}}}), Shape{37}, 37},
      {layerSpec("c", "conv2d", {},
                 {{"filters", int64_t{5}}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}}),
       Shape{6, 9, 9}, 6 * 9},  // Winograd: its transforms sum more terms than the 54 products
      {layerSpec("c1", "conv2d", {}, {{"filters", int64_t{4}}, {"kernel", int64_t{1}}}), Shape{8, 5, 5}, 8},
      {layerSpec("dw", "depthwise_conv2d", {}, {{"kernel", int64_t{3}}, {"padding", int64_t{1}}}),
       Shape{4, 6, 6}, 9},
  };
  for (const Format& f : {kBf16, kFp16})
    for (const Case& c : cases) {
      INFO(c.spec.type, " in ", precisionName(f.precision));
      checkProduct(c, f);
    }
}

TEST_CASE("relu, max pooling and batch normalisation in bf16 and fp16 stay within the formats' bounds") {
  const int64_t batch = 6;
  const Shape shape{3, 4, 4};
  for (const Format& f : {kBf16, kFp16}) {
    INFO(precisionName(f.precision));
    test::Rng rng(23);
    const std::vector<float> x = distinctValues(shape.numel() * batch, rng);
    std::vector<float> dy(x.size());
    for (float& v : dy) v = rng.normal();
    const double u = f.u, mx = maxAbs(x);

    // relu: the value itself, or 0.
    const LayerSpec relu = layerSpec("r", "relu", {});
    Pass a = runLayer(relu, shape, batch, Precision::Fp32, {}, x, dy);
    Pass b = runLayer(relu, shape, batch, f.precision, {}, rounded(f, x), dy);
    checkWithin("relu forward", b.y, a.y, [&](size_t i) { return u * std::fabs(x[i]) + f.eta + 1e-30; });
    checkWithin("relu backward", b.dx, a.dx, [&](size_t i) { return u * std::fabs(dy[i]) + f.eta + 1e-30; });

    const LayerSpec pool = layerSpec("p", "max_pool", {});  // 2x2, stride 2
    a = runLayer(pool, shape, batch, Precision::Fp32, {}, x, std::vector<float>(x.size() / 4, 1.0f));
    b = runLayer(pool, shape, batch, f.precision, {}, rounded(f, x), std::vector<float>(x.size() / 4, 1.0f));
    checkWithin("max pool forward", b.y, a.y, [&](size_t) { return u * mx + f.eta; });
    CHECK(b.dx == a.dx);  // the same maxima win: values are gap-spaced far beyond a rounding

    // Batch norm, training statistics: gamma and beta drawn away from 1 and 0.
    const LayerSpec bn = layerSpec("bn", "batch_norm", {});
    std::vector<float> gb = {1.3f, -0.7f, 0.9f, 0.2f, -0.4f, 0.6f};  // gamma per channel, then beta
    a = runLayer(bn, shape, batch, Precision::Fp32, gb, x, dy);
    b = runLayer(bn, shape, batch, f.precision, gb, rounded(f, x), dy);
    const int64_t plane = 16, per_channel = plane * batch;
    std::vector<double> mean(3, 0), sigma(3, 0);
    for (size_t i = 0; i < x.size(); ++i) mean[(i / plane) % 3] += x[i] / static_cast<double>(per_channel);
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i] - mean[(i / plane) % 3];
      sigma[(i / plane) % 3] += d * d / static_cast<double>(per_channel);
    }
    for (double& s : sigma) s = std::sqrt(s + 1e-5);
    const double big_d = 2 * u * mx;
    checkWithin("batch norm forward", b.y, a.y, [&](size_t i) {
      const size_t ch = (i / plane) % 3;
      const double xhat = std::fabs(x[i] - mean[ch]) / sigma[ch];
      return std::fabs(gb[ch]) * (big_d + xhat * big_d) / (sigma[ch] - big_d) + u * std::fabs(b.y[i]) +
             f.eta + 1e-5 * std::fabs(a.y[i]);  // fp32 arithmetic of the normalisation itself
    });
    checkRepresentable(f, "batch norm output", b.y);
  }
}

TEST_CASE("a 16-bit model stores its activations and their gradients rounded, its weight gradients in fp32") {
  // conv -> relu (fused) -> flatten -> dense: every stored result checked.
  const std::vector<LayerSpec> specs = {
      layerSpec("c", "conv2d", {}, {{"filters", int64_t{3}}, {"kernel", int64_t{3}}}),
      layerSpec("r", "relu", {}), layerSpec("f", "flatten", {}),
      layerSpec("d", "dense", {}, {{"units", int64_t{4}}})};
  const Shape in{2, 6, 6};
  for (const Format& f : {kBf16, kFp16}) {
    Model model(specs, in, builtinLayers(), LayerDefaults{});
    model.setPrecision(f.precision);
    ParamStore store;
    model.registerParams(store);
    store.allocate();
    test::Rng rng(5);
    test::fillParams(store, rng, 0.3f);
    const std::vector<float> masters = values(store.params());
    Tensor grads = store.gradBuffer();
    model.bind(store, grads, 3);
    Tensor x = Tensor::empty(in.withBatch(3));
    rng.fill(x);
    const Tensor& y = model.forward(x, LayerContext{});
    checkRepresentable(f, "logits", values(y));
    Tensor dy = Tensor::empty(y.shape());
    rng.fill(dy, 1e-3f);
    model.backward(x, dy, LayerContext{});
    CHECK(values(store.params()) == masters);
    const std::vector<float> g = values(grads), rg = rounded(f, g);
    int64_t exact = 0;
    for (size_t i = 0; i < g.size(); ++i) exact += rg[i] == g[i];
    CHECK(exact < static_cast<int64_t>(g.size()) / 2);
    // Setting fp32 again after bind computes in fp32: the logits differ.
    Model plain(specs, in, builtinLayers(), LayerDefaults{});
    Tensor grads32 = store.gradBuffer();
    plain.bind(store, grads32, 3);
    const std::vector<float> y32 = values(plain.forward(x, LayerContext{}));
    CHECK(y32 != values(model.forward(x, LayerContext{})));
    model.setPrecision(Precision::Fp32);
    CHECK(values(model.forward(x, LayerContext{})) == y32);
  }
}

TEST_CASE("a 16-bit model leaves token ids in fp32: ids above 256 look up their own rows") {
  // bf16 holds whole numbers exactly only to 256 and fp16 to 2048: 257
  // would round to 256, 1001 to 1000 (bf16) and 2049 to 2048 (fp16), each
  // looking up a neighbour's row.
  const std::vector<LayerSpec> specs = {
      layerSpec("wte", "embedding", {}, {{"vocab", int64_t{2100}}, {"dim", int64_t{8}}})};
  for (const Format& f : {kBf16, kFp16}) {
    Model model(specs, Shape{3}, builtinLayers(), LayerDefaults{});
    model.setPrecision(f.precision);
    ParamStore store;
    model.registerParams(store);
    store.allocate();
    store.initialize(3);
    Tensor grads = store.gradBuffer();
    model.bind(store, grads, 1);
    Tensor ids = Tensor::empty(Shape{1, 3});
    const float picked[3] = {257.0f, 1001.0f, 2049.0f};
    std::copy(picked, picked + 3, ids.data());
    const std::vector<float> y = values(model.forward(ids, LayerContext{}));
    const std::vector<float> table = values(store.params());
    for (int t = 0; t < 3; ++t) {
      const auto row = static_cast<size_t>(picked[t]) * 8;
      const std::vector<float> want =
          rounded(f, std::vector<float>(table.begin() + static_cast<long>(row),
                                        table.begin() + static_cast<long>(row) + 8));
      CHECK(std::vector<float>(y.begin() + t * 8, y.begin() + t * 8 + 8) == want);
    }
  }
}

}  // namespace
}  // namespace dtrain
