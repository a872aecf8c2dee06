// Grouped and depthwise convolution: the depthwise kernels and the layers
// against a direct double-precision reference (forward and all three
// gradients), every algorithm and path (grouped im2col with unpacked and
// packed products, depthwise vectorised and direct), finite-difference
// checks, the fused relu's backward, and the option errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/depthwise_ops.h"
#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/depthwise_conv2d.h"
#include "nn_test_util.h"
#include "tests/common/conv_config.h"

using namespace dtrain;
using namespace dtrain::test;
using dtrain::testing::convConfig;

namespace {

// A grouped convolution's geometry, as the reference needs it.
struct Geometry {
  int64_t n, channels, height, width, filters, groups;
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t outHeight() const { return (height + 2 * ph - kh) / sh + 1; }
  int64_t outWidth() const { return (width + 2 * pw - kw) / sw + 1; }
};

struct Reference {
  std::vector<double> y, dx, dw, db;
  std::vector<double> dy_used;  // dy where it reaches the gradients (masked by y > 0 with relu), else 0
};

// Direct grouped convolution in double: y = act(conv(x, w) + b), and, given
// dy, the gradients with dy masked by y > 0 when relu.
Reference reference(const Geometry& g, const float* x, const float* w, const float* b, bool relu,
                    const float* dy) {
  const int64_t ho = g.outHeight(), wo = g.outWidth(), cg = g.channels / g.groups, fg = g.filters / g.groups;
  Reference r;
  r.y.assign(g.n * g.filters * ho * wo, 0.0);
  r.dx.assign(g.n * g.channels * g.height * g.width, 0.0);
  r.dw.assign(g.filters * cg * g.kh * g.kw, 0.0);
  r.db.assign(g.filters, 0.0);
  r.dy_used.assign(r.y.size(), 0.0);
  // Calls f(output index, input index, weight index) for every product term.
  auto terms = [&](int64_t s, int64_t f, int64_t oy, int64_t ox, auto fn) {
    for (int64_t q = 0; q < cg; ++q)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;
          if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) continue;
          const int64_t c = f / fg * cg + q;
          fn(((s * g.channels + c) * g.height + iy) * g.width + ix, ((f * cg + q) * g.kh + i) * g.kw + j);
        }
  };
  for (int64_t s = 0; s < g.n; ++s)
    for (int64_t f = 0; f < g.filters; ++f)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          const int64_t o = ((s * g.filters + f) * ho + oy) * wo + ox;
          double acc = b ? b[f] : 0.0;
          terms(s, f, oy, ox, [&](int64_t xi, int64_t wi) { acc += static_cast<double>(w[wi]) * x[xi]; });
          r.y[o] = relu ? std::max(acc, 0.0) : acc;
          if (!dy || (relu && !(acc > 0.0))) continue;
          const double d = dy[o];
          r.dy_used[o] = d;
          r.db[f] += d;
          terms(s, f, oy, ox, [&](int64_t xi, int64_t wi) {
            r.dw[wi] += d * x[xi];
            r.dx[xi] += d * w[wi];
          });
        }
  return r;
}

// A bound on the round-off of F(4x4,3x3)'s weight gradient (groups 1,
// stride 1), per weight, from the arithmetic: dw = G^T [sum over tiles of
// (A dY A^T) o (B^T d B)] G (the matrices of core/backend/cpu/winograd4x4.cpp)
// with every step's error within gamma_K of its terms' magnitudes, so the
// bound is gamma_K |G|^T [sum |A||dY||A|^T o |B|^T|d||B|] |G|. K counts the
// longest chain of roundings: the input transform (two passes of six terms),
// the output-gradient transform (two of six), the product over the batch's
// tiles (and the chunks added into it), and the filter transform (two passes
// of six terms times rounded reciprocals). It holds for any summation order,
// so for every CPU level's products alike.
std::vector<double> winograd4x4WeightGradBound(const Geometry& g, const float* x, const Reference& r) {
  static const double kBt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                   {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static const double kG[6][3] = {{0.25, 0, 0},           {1.0 / 6, 1.0 / 6, 1.0 / 6}, {1.0 / 6, 1.0 / 6, 1.0 / 6},
                                  {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  static const double kAt[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}};
  const int64_t ho = g.outHeight(), wo = g.outWidth(), th = (ho + 3) / 4, tw = (wo + 3) / 4;
  const int64_t tiles = g.n * th * tw;
  const double u = std::ldexp(1.0, -24), k = 12 + 12 + tiles + g.n + 16;
  const double gamma = k * u / (1 - k * u);
  std::vector<double> bound(g.filters * g.channels * 9, 0.0);
  for (int64_t f = 0; f < g.filters; ++f)
    for (int64_t c = 0; c < g.channels; ++c) {
      double m[6][6] = {};
      for (int64_t s = 0; s < g.n; ++s)
        for (int64_t ti = 0; ti < th; ++ti)
          for (int64_t tj = 0; tj < tw; ++tj) {
            double d[6][6], dy[4][4], v[6][6] = {}, z[6][6] = {};
            for (int a = 0; a < 6; ++a)
              for (int b = 0; b < 6; ++b) {
                const int64_t iy = 4 * ti - g.ph + a, ix = 4 * tj - g.pw + b;
                const bool in = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
                d[a][b] = in ? std::fabs(x[((s * g.channels + c) * g.height + iy) * g.width + ix]) : 0.0;
              }
            for (int p = 0; p < 4; ++p)
              for (int q = 0; q < 4; ++q) {
                const int64_t oy = 4 * ti + p, ox = 4 * tj + q;
                dy[p][q] = oy < ho && ox < wo ? std::fabs(r.dy_used[((s * g.filters + f) * ho + oy) * wo + ox]) : 0.0;
              }
            for (int i = 0; i < 6; ++i)
              for (int j = 0; j < 6; ++j) {
                for (int a = 0; a < 6; ++a)
                  for (int b = 0; b < 6; ++b) v[i][j] += std::fabs(kBt[i][a]) * d[a][b] * std::fabs(kBt[j][b]);
                for (int p = 0; p < 4; ++p)
                  for (int q = 0; q < 4; ++q) z[i][j] += kAt[p][i] * dy[p][q] * kAt[q][j];
                m[i][j] += z[i][j] * v[i][j];
              }
          }
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          double sum = 0;
          for (int i = 0; i < 6; ++i)
            for (int j = 0; j < 6; ++j) sum += kG[i][ky] * m[i][j] * kG[j][kx];
          bound[(f * g.channels + c) * 9 + ky * 3 + kx] = gamma * sum;
        }
    }
  return bound;
}

// Whether every |got - want| is within its bound.
bool withinBounds(const float* got, const std::vector<double>& want, const std::vector<double>& bound) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= bound[i])) return false;
  return true;
}

// max |got - want| / (1 + |want|); `offset` is subtracted from got first.
double worst(const float* got, const std::vector<double>& want, double offset = 0.0) {
  double e = 0.0;
  for (size_t i = 0; i < want.size(); ++i)
    e = std::max(e, std::fabs(got[i] - offset - want[i]) / (1.0 + std::fabs(want[i])));
  return e;
}

std::vector<float> normals(int64_t count, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& f : v) f = rng.normal();
  return v;
}

Geometry geometryOf(const Conv2d& layer, const Shape& in, int64_t n) {
  const Conv2dConfig& c = layer.config();
  return {n,          in[0],      in[1],      in[2],      c.filters, c.groups,
          c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.pad_h,   c.pad_w};
}

Conv2dConfig grouped(int64_t filters, int64_t groups, int64_t stride, int64_t pad, int64_t kernel = 3,
                     ConvAlgo algo = ConvAlgo::Auto, bool bias = true) {
  Conv2dConfig c = convConfig(filters, kernel, kernel, stride, stride, pad, pad, algo, bias);
  c.groups = groups;
  return c;
}

Conv2dConfig depthwise(int64_t multiplier, int64_t stride, int64_t pad, int64_t kernel = 3,
                       ConvAlgo algo = ConvAlgo::Auto, bool bias = true) {
  Conv2dConfig c = convConfig(0, kernel, kernel, stride, stride, pad, pad, algo, bias);
  c.depth_multiplier = multiplier;
  return c;
}

struct LayerCase {
  std::string what;
  Shape in;
  Conv2dConfig config;
  ConvAlgo expect;  // the algorithm setup() must choose
};

// Every path of the grouped layer; odd extents throughout.
const LayerCase kLayerCases[] = {
    {"groups 1", Shape{4, 7, 13}, grouped(6, 1, 1, 1), ConvAlgo::Winograd4x4},
    {"groups 1, Winograd 2x2", Shape{4, 7, 9}, grouped(6, 1, 1, 1, 3, ConvAlgo::Winograd2x2),
     ConvAlgo::Winograd2x2},
    {"groups 2, stride 1, padding 1", Shape{4, 7, 9}, grouped(6, 2, 1, 1), ConvAlgo::Im2col},
    {"groups 2, stride 2, padding 0", Shape{4, 7, 9}, grouped(6, 2, 2, 0), ConvAlgo::Im2col},
    {"groups 4, stride 2, padding 1", Shape{8, 7, 9}, grouped(4, 4, 2, 1), ConvAlgo::Im2col},
    {"groups 4, pointwise", Shape{8, 7, 9}, grouped(12, 4, 1, 0, 1), ConvAlgo::Im2col},
    {"groups 2, packed products", Shape{32, 5, 7}, grouped(4, 2, 1, 1), ConvAlgo::Im2col},
    {"groups 2, no bias", Shape{4, 7, 9}, grouped(4, 2, 1, 1, 3, ConvAlgo::Auto, false), ConvAlgo::Im2col},
    {"depthwise x1, stride 1, padding 1", Shape{3, 7, 9}, depthwise(1, 1, 1), ConvAlgo::Depthwise},
    {"depthwise x2, stride 1, padding 1", Shape{3, 7, 9}, depthwise(2, 1, 1), ConvAlgo::Depthwise},
    {"depthwise x1, stride 2, padding 1", Shape{3, 7, 9}, depthwise(1, 2, 1), ConvAlgo::Depthwise},
    {"depthwise x2, stride 2, padding 1", Shape{3, 9, 7}, depthwise(2, 2, 1), ConvAlgo::Depthwise},
    {"depthwise x1, stride 1, padding 0", Shape{3, 7, 9}, depthwise(1, 1, 0), ConvAlgo::Depthwise},
    {"depthwise x2, stride 2, padding 0", Shape{3, 7, 9}, depthwise(2, 2, 0), ConvAlgo::Depthwise},
    {"depthwise x1, 5x5, stride 2, padding 2", Shape{2, 9, 7}, depthwise(1, 2, 2, 5), ConvAlgo::Depthwise},
    {"depthwise x1, no bias", Shape{3, 7, 9}, depthwise(1, 2, 1, 3, ConvAlgo::Auto, false),
     ConvAlgo::Depthwise},
    {"depthwise x2 by grouped im2col", Shape{3, 7, 9}, depthwise(2, 2, 1, 3, ConvAlgo::Im2col),
     ConvAlgo::Im2col},
    {"conv2d groups = channels", Shape{4, 7, 9}, grouped(8, 4, 1, 1), ConvAlgo::Depthwise},
};

// The harness's layer as the Conv2d it is.
Conv2d& conv(Harness& h) { return static_cast<Conv2d&>(*h.layer); }

std::unique_ptr<Layer> makeLayer(const Conv2dConfig& c) {
  if (c.depth_multiplier > 0) return std::make_unique<DepthwiseConv2d>("dw", c);
  return std::make_unique<Conv2d>("conv", c);
}

}  // namespace

TEST_CASE("depthwise kernels equal the direct reference for every plane size, stride and multiplier") {
  // Planes narrower than a vector, one row, several vectors per row; the
  // vectorised paths (3x3 padding 1) and the direct one (padding 0, 5x5).
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1}, {1, 2}, {2, 3},   {3, 3},
                                               {6, 6}, {7, 9}, {12, 12}, {17, 33}};
  struct Window {
    int64_t kernel, stride, pad;
  };
  const Window windows[] = {{3, 1, 1}, {3, 2, 1}, {3, 1, 0}, {5, 2, 2}};
  Rng rng(71);
  int64_t vectorised = 0, direct = 0;
  for (const auto& [h, w] : sizes)
    for (const Window& win : windows)
      for (int64_t m : {1, 2})
        for (bool relu : {false, true}) {
          if (h + 2 * win.pad < win.kernel || w + 2 * win.pad < win.kernel) continue;
          CAPTURE(h);
          CAPTURE(w);
          CAPTURE(win.kernel);
          CAPTURE(win.stride);
          CAPTURE(win.pad);
          CAPTURE(m);
          CAPTURE(relu);
          const int64_t n = 2, c = 3, f = c * m;
          const ops::Window2d g{c, h, w, win.kernel, win.kernel, win.stride, win.stride, win.pad, win.pad};
          (ops::depthwiseVectorised(g) ? vectorised : direct) += 1;
          const Geometry geo{n,          c,          h,          w,          f,       c,
                             win.kernel, win.kernel, win.stride, win.stride, win.pad, win.pad};
          const int64_t outs = n * f * g.outPlane();
          const std::vector<float> x = normals(n * c * h * w, rng),
                                   wt = normals(f * win.kernel * win.kernel, rng), b = normals(f, rng),
                                   dy = normals(outs, rng);
          Tensor scratch = Tensor::empty(Shape{std::max<int64_t>(1, ops::depthwiseScratchFloats(g))});
          // NaN fill: any output element the kernels fail to write shows.
          std::vector<float> y(outs, std::numeric_limits<float>::quiet_NaN());
          ops::depthwiseForward(x.data(), n, g, m, wt.data(), b.data(), relu, y.data(), scratch.data());
          const Reference r = reference(geo, x.data(), wt.data(), b.data(), relu, dy.data());
          CHECK(worst(y.data(), r.y) < 1e-5);

          std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
          std::vector<float> dw(wt.size(), 0.5f), db(f, 0.25f);  // accumulated onto
          ops::depthwiseBackward(x.data(), relu ? y.data() : nullptr, dy.data(), n, g, m, wt.data(),
                                 dw.data(), db.data(), dx.data(), scratch.data());
          CHECK(worst(dx.data(), r.dx) < 1e-5);
          CHECK(worst(dw.data(), r.dw, 0.5) < 1e-5);
          CHECK(worst(db.data(), r.db, 0.25) < 1e-5);

          // Without dx and dbias (the network's first layer, no bias): the rest unchanged.
          std::vector<float> dw2(wt.size(), 0.5f);
          ops::depthwiseBackward(x.data(), relu ? y.data() : nullptr, dy.data(), n, g, m, wt.data(),
                                 dw2.data(), nullptr, nullptr, scratch.data());
          CHECK(worst(dw2.data(), r.dw, 0.5) < 1e-5);
        }
  CHECK(vectorised > 0);
  CHECK(direct > 0);
}

TEST_CASE("depthwise: the MobileNet geometries take the vectorised paths") {
  CHECK(ops::depthwiseVectorised(ops::Window2d{32, 48, 48, 3, 3, 1, 1, 1, 1}));
  CHECK(ops::depthwiseVectorised(ops::Window2d{96, 48, 48, 3, 3, 2, 2, 1, 1}));
  CHECK_FALSE(ops::depthwiseVectorised(ops::Window2d{32, 48, 48, 3, 3, 1, 1, 0, 0}));
  CHECK_FALSE(ops::depthwiseVectorised(ops::Window2d{32, 48, 48, 3, 3, 1, 2, 1, 1}));
  CHECK_FALSE(ops::depthwiseVectorised(ops::Window2d{32, 48, 48, 5, 5, 1, 1, 2, 2}));
}

TEST_CASE("grouped conv2d forward equals the direct reference (bias, fused relu, every algorithm)") {
  Rng rng(72);
  for (const LayerCase& k : kLayerCases)
    for (bool relu : {false, true}) {
      CAPTURE(k.what);
      CAPTURE(relu);
      Harness h(makeLayer(k.config), k.in, 3, rng);
      if (relu) REQUIRE(h.layer->fuseActivation("relu"));
      CHECK(conv(h).algorithm() == k.expect);
      h.forward();
      const Geometry g = geometryOf(conv(h), k.in, 3);
      const Reference r = reference(g, h.x.data(), h.params[0].data(),
                                    k.config.bias ? h.params[1].data() : nullptr, relu, nullptr);
      // F(4x4,3x3)'s transforms round off more (1/6 and 1/24 weights, sums of six terms).
      CHECK(worst(h.y.data(), r.y) < (k.expect == ConvAlgo::Winograd4x4 ? 5e-5 : 1e-5));
    }
}

TEST_CASE("grouped conv2d backward equals the direct reference, with and without the input gradient") {
  Rng rng(73);
  for (const LayerCase& k : kLayerCases)
    for (bool relu : {false, true}) {
      CAPTURE(k.what);
      CAPTURE(relu);
      Harness h(makeLayer(k.config), k.in, 3, rng);
      if (relu) REQUIRE(h.layer->fuseActivation("relu"));
      h.forward();
      h.backward();
      const Geometry g = geometryOf(conv(h), k.in, 3);
      Reference r = reference(g, h.x.data(), h.params[0].data(), k.config.bias ? h.params[1].data() : nullptr,
                              relu, h.dy.data());
      // Weight gradients are sums of a few hundred products (Winograd's
      // transforms add to their round-off): 5e-5 relative.
      CHECK(worst(h.dx.data(), r.dx) < (k.expect == ConvAlgo::Winograd4x4 ? 5e-5 : 1e-5));
      const bool wino4 = k.expect == ConvAlgo::Winograd4x4;
      std::vector<double> bound = wino4 ? winograd4x4WeightGradBound(g, h.x.data(), r) : std::vector<double>();
      if (wino4)
        CHECK(withinBounds(h.grads[0].data(), r.dw, bound));
      else
        CHECK(worst(h.grads[0].data(), r.dw) < 5e-5);
      if (k.config.bias) CHECK(worst(h.grads[1].data(), r.db) < 5e-5);
      // The first layer's backward (no input gradient) accumulates the same
      // parameter gradients once more: twice the sum and its bound, and the
      // addition's own rounding.
      h.backward({}, false);
      for (double& v : r.dw) v *= 2.0;
      for (size_t i = 0; i < bound.size(); ++i) bound[i] = 2 * bound[i] + std::ldexp(std::fabs(r.dw[i]), -23);
      if (wino4)
        CHECK(withinBounds(h.grads[0].data(), r.dw, bound));
      else
        CHECK(worst(h.grads[0].data(), r.dw) < 5e-5);
    }
}

TEST_CASE("gradcheck: grouped and depthwise conv2d") {
  const LayerCase cases[] = {
      {"groups 2", Shape{4, 7, 6}, grouped(4, 2, 2, 1), ConvAlgo::Im2col},
      {"groups 2, packed", Shape{32, 3, 4}, grouped(4, 2, 1, 1), ConvAlgo::Im2col},
      {"depthwise x1, stride 1", Shape{3, 7, 9}, depthwise(1, 1, 1), ConvAlgo::Depthwise},
      {"depthwise x2, stride 2", Shape{2, 7, 9}, depthwise(2, 2, 1), ConvAlgo::Depthwise},
      {"depthwise x2, padding 0", Shape{2, 6, 5}, depthwise(2, 1, 0), ConvAlgo::Depthwise},
      {"depthwise x2 by grouped im2col", Shape{2, 6, 5}, depthwise(2, 2, 1, 3, ConvAlgo::Im2col),
       ConvAlgo::Im2col},
  };
  Rng rng(74);
  for (const LayerCase& k : cases) {
    CAPTURE(k.what);
    Harness h(makeLayer(k.config), k.in, 3, rng);
    CHECK(conv(h).algorithm() == k.expect);
    const GradCheckResult r = gradCheck(h, rng);
    INFO("worst: " << r.where);
    CHECK(r.checked > 0);
    CHECK(r.worst <= 1.0);
  }
}

TEST_CASE("grouped conv2d: a fused relu's backward is the layer's backward of dy masked by y > 0") {
  for (const LayerCase& k : kLayerCases) {
    CAPTURE(k.what);
    Rng a(75), b(75);  // the same parameters, input and dy for both
    Harness fused(makeLayer(k.config), k.in, 3, a), plain(makeLayer(k.config), k.in, 3, b);
    REQUIRE(fused.layer->fuseActivation("relu"));
    fused.forward();
    plain.forward();
    for (int64_t i = 0; i < plain.y.numel(); ++i) {
      CHECK(fused.y.data()[i] == std::max(plain.y.data()[i], 0.0f));
      if (!(plain.y.data()[i] > 0.0f)) plain.dy.data()[i] = 0.0f;
    }
    fused.backward();
    plain.backward();
    CHECK(maxRelDiff(fused.dx, plain.dx) < 1e-6);
    for (size_t i = 0; i < fused.grads.size(); ++i) CHECK(maxRelDiff(fused.grads[i], plain.grads[i]) < 1e-6);
  }
}

TEST_CASE("grouped conv2d: parameters, fan-in, flops and description") {
  Conv2d g("g", grouped(8, 2, 1, 1));
  CHECK(g.setup({Shape{6, 5, 5}}) == Shape{8, 5, 5});
  const std::vector<ParamSpec> specs = g.paramSpecs();
  CHECK(specs[0].shape == Shape{8, 3, 3, 3});
  CHECK(specs[0].fan_in == 27);
  CHECK(specs[0].fan_out == 36);
  CHECK(specs[1].shape == Shape{8});
  CHECK(g.forwardFlops() == 2 * 8 * 25 * 27 + 8 * 25);
  CHECK(g.describe() == "3x3 s1 p1, 8 filters, 2 groups");
  CHECK(g.type() == "conv2d");

  DepthwiseConv2d d("d", depthwise(2, 2, 1, 3, ConvAlgo::Auto, false));
  CHECK(d.type() == "depthwise_conv2d");
  CHECK(d.setup({Shape{5, 9, 8}}) == Shape{10, 5, 4});
  CHECK(d.config().groups == 5);
  CHECK(d.config().filters == 10);
  REQUIRE(d.paramSpecs().size() == 1);
  CHECK(d.paramSpecs()[0].name == "weight");
  CHECK(d.paramSpecs()[0].shape == Shape{10, 1, 3, 3});
  CHECK(d.paramSpecs()[0].fan_in == 9);
  CHECK(d.forwardFlops() == 2 * 10 * 20 * 9);
  CHECK(d.describe() == "3x3 s2 p1, depth multiplier 2, no bias");
  // setup() follows the input: another channel count, other filters.
  CHECK(d.setup({Shape{3, 9, 8}}) == Shape{6, 5, 4});
  CHECK(d.paramSpecs()[0].shape == Shape{6, 1, 3, 3});
}

namespace {

LayerOptions opts(const std::string& type,
                  std::initializer_list<std::pair<std::string, LayerOptions::Value>> entries) {
  LayerOptions o("c", type, SourcePos{"job.toml", 30, 1});
  int line = 31;
  for (const auto& [key, value] : entries) o.set(key, value, SourcePos{"job.toml", line++, 1});
  return o;
}

std::string configError(const std::string& type, const LayerOptions& o) {
  try {
    builtinLayers().create(type, o.layer(), o, {});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string shapeError(Layer& layer, const Shape& in) {
  try {
    layer.setup({in});
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("grouped conv2d and depthwise_conv2d: option errors name the option and both numbers") {
  std::string msg = configError("conv2d", opts("conv2d", {{"filters", int64_t{8}}, {"groups", int64_t{3}}}));
  CHECK(contains(msg, "job.toml:32:1"));
  CHECK(contains(msg, "filters 8 are not divisible by groups 3"));
  msg = configError("conv2d", opts("conv2d", {{"filters", int64_t{8}}, {"groups", int64_t{0}}}));
  CHECK(contains(msg, "groups must be > 0 (got 0)"));
  msg = configError("depthwise_conv2d", opts("depthwise_conv2d", {{"depth_multiplier", int64_t{0}}}));
  CHECK(contains(msg, "job.toml:31:1"));
  CHECK(contains(msg, "depth_multiplier must be > 0 (got 0)"));
  msg = configError("depthwise_conv2d", opts("depthwise_conv2d", {{"depth_multiplier", int64_t{-2}}}));
  CHECK(contains(msg, "depth_multiplier must be > 0 (got -2)"));
  // Filters and groups follow the input: a depthwise layer takes neither.
  msg = configError("depthwise_conv2d", opts("depthwise_conv2d", {{"filters", int64_t{8}}}));
  CHECK(contains(msg, "unknown option 'filters'"));

  // The input channels are known at setup: a ShapeError naming both numbers.
  auto layer = builtinLayers().create("conv2d", "c",
                                      opts("conv2d", {{"filters", int64_t{8}}, {"groups", int64_t{4}}}), {});
  msg = shapeError(*layer, Shape{6, 5, 5});
  CHECK(contains(msg, "layer 'c' (conv2d): input channels 6 are not divisible by groups 4"));
  CHECK(layer->setup({Shape{12, 5, 5}}) == Shape{8, 3, 3});

  auto dw = builtinLayers().create("depthwise_conv2d", "dw",
                                   opts("depthwise_conv2d", {{"stride", int64_t{2}},
                                                             {"padding", int64_t{1}},
                                                             {"depth_multiplier", int64_t{3}},
                                                             {"bias", false}}),
                                   {});
  CHECK(dw->type() == "depthwise_conv2d");
  CHECK(dw->setup({Shape{4, 7, 7}}) == Shape{12, 4, 4});
  CHECK(dw->paramSpecs().size() == 1);

  // Pinned algorithms that do not fit the groups.
  Conv2d wino("w", grouped(4, 2, 1, 1, 3, ConvAlgo::Winograd2x2));
  CHECK(contains(shapeError(wino, Shape{4, 6, 6}), "the Winograd algorithm needs groups 1"));
  Conv2d direct("d", grouped(4, 2, 1, 1, 3, ConvAlgo::Depthwise));
  CHECK(contains(shapeError(direct, Shape{4, 6, 6}),
                 "the depthwise algorithm needs groups = input channels (2 groups, 4 channels)"));
  CHECK_THROWS_AS(Conv2d("bad", grouped(6, 4, 1, 1)), ConfigError);
}
