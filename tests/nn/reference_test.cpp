// Forward results against naive direct implementations (double accumulation)
// on random inputs and geometries, for every convolution algorithm and both
// pooling kinds; and fused relu against conv/dense followed by a relu layer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/nn/layers/avg_pool.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/max_pool.h"
#include "core/nn/layers/relu.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Direct convolution: y[n,f,oy,ox] = b[f] + sum w[f,c,i,j] x[n,c,oy*sh-ph+i, ox*sw-pw+j].
Tensor naiveConv(const Tensor& x, const Tensor& w, const Tensor* b, const Conv2dConfig& c) {
  const int64_t n = x.dim(0), ch = x.dim(1), h = x.dim(2), wd = x.dim(3), f = c.filters;
  const int64_t ho = (h + 2 * c.pad_h - c.kernel_h) / c.stride_h + 1;
  const int64_t wo = (wd + 2 * c.pad_w - c.kernel_w) / c.stride_w + 1;
  Tensor y = Tensor::empty(Shape{n, f, ho, wo});
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < f; ++k)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double acc = b ? b->data()[k] : 0.0;
          for (int64_t q = 0; q < ch; ++q)
            for (int64_t i = 0; i < c.kernel_h; ++i)
              for (int64_t j = 0; j < c.kernel_w; ++j) {
                const int64_t iy = oy * c.stride_h - c.pad_h + i, ix = ox * c.stride_w - c.pad_w + j;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += static_cast<double>(w.data()[((k * ch + q) * c.kernel_h + i) * c.kernel_w + j]) *
                       x.data()[((s * ch + q) * h + iy) * wd + ix];
              }
          y.data()[((s * f + k) * ho + oy) * wo + ox] = static_cast<float>(acc);
        }
  return y;
}

Tensor naivePool(const Tensor& x, const PoolConfig& c, bool max) {
  const int64_t n = x.dim(0), ch = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t ho = (h + 2 * c.pad_h - c.kernel_h) / c.stride_h + 1;
  const int64_t wo = (wd + 2 * c.pad_w - c.kernel_w) / c.stride_w + 1;
  Tensor y = Tensor::empty(Shape{n, ch, ho, wo});
  for (int64_t p = 0; p < n * ch; ++p)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t i = 0; i < c.kernel_h; ++i)
          for (int64_t j = 0; j < c.kernel_w; ++j) {
            const int64_t iy = oy * c.stride_h - c.pad_h + i, ix = ox * c.stride_w - c.pad_w + j;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;  // padding: ignored / zero
            const double v = x.data()[(p * h + iy) * wd + ix];
            acc = max ? std::max(acc, v) : acc + v;
          }
        y.data()[(p * ho + oy) * wo + ox] = static_cast<float>(max ? acc : acc / (c.kernel_h * c.kernel_w));
      }
  return y;
}

}  // namespace

TEST_CASE("conv2d forward matches direct convolution") {
  Rng rng(21);
  int cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Conv2dConfig c;
    c.filters = 1 + static_cast<int64_t>(rng.uniform(0, 9));
    const int64_t ch = 1 + static_cast<int64_t>(rng.uniform(0, 6));
    const int64_t h = 3 + static_cast<int64_t>(rng.uniform(0, 18)),
                  w = 3 + static_cast<int64_t>(rng.uniform(0, 18));
    const bool winograd = trial % 2 == 0;
    if (winograd) {
      c.kernel_h = c.kernel_w = 3;
      c.pad_h = c.pad_w = static_cast<int64_t>(rng.uniform(0, 2.99f));
      c.algo = trial % 4 == 0 ? ConvAlgo::Winograd2x2 : ConvAlgo::Winograd4x4;
    } else {
      c.kernel_h = 1 + static_cast<int64_t>(rng.uniform(0, std::min<int64_t>(h, 5)));
      c.kernel_w = 1 + static_cast<int64_t>(rng.uniform(0, std::min<int64_t>(w, 5)));
      c.stride_h = 1 + static_cast<int64_t>(rng.uniform(0, 2.99f));
      c.stride_w = 1 + static_cast<int64_t>(rng.uniform(0, 2.99f));
      c.pad_h = static_cast<int64_t>(rng.uniform(0, 2.99f));
      c.pad_w = static_cast<int64_t>(rng.uniform(0, 2.99f));
      c.algo = ConvAlgo::Im2col;
    }
    c.bias = trial % 3 != 0;
    const int64_t n = 1 + static_cast<int64_t>(rng.uniform(0, 4));
    CAPTURE(trial);
    CAPTURE(Shape({ch, h, w}).str());
    CAPTURE(c.kernel_h);
    CAPTURE(c.kernel_w);
    CAPTURE(c.stride_h);
    CAPTURE(c.stride_w);
    CAPTURE(c.pad_h);
    CAPTURE(c.pad_w);
    Harness hn(std::make_unique<Conv2d>("c", c), Shape{ch, h, w}, n, rng);
    hn.forward();
    Tensor ref = naiveConv(hn.x, hn.params[0], c.bias ? &hn.params[1] : nullptr, c);
    CHECK(hn.y.shape() == ref.shape());
    CHECK(maxRelDiff(hn.y, ref) < 1e-4);
    ++cases;
  }
  CHECK(cases == 40);
}

TEST_CASE("conv2d chooses winograd for 3x3 stride 1 with enough channels") {
  Conv2dConfig c;
  c.filters = 8;
  c.pad_h = c.pad_w = 1;
  Conv2d a("a", c), b("b", c), narrow("narrow", c);
  a.setup({Shape{32, 14, 14}});
  b.setup({Shape{1, 28, 28}});
  narrow.setup({Shape{32, 8, 8}});  // 2 tiles of 4x4 per row: F(2x2,3x3) is faster
  CHECK(a.algorithm() == ConvAlgo::Winograd4x4);
  CHECK(b.algorithm() == ConvAlgo::Im2col);
  CHECK(narrow.algorithm() == ConvAlgo::Winograd2x2);
  c.stride_h = 2;
  Conv2d s("s", c);
  s.setup({Shape{32, 14, 14}});
  CHECK(s.algorithm() == ConvAlgo::Im2col);
}

TEST_CASE("pooling forward matches direct pooling") {
  Rng rng(22);
  for (int trial = 0; trial < 30; ++trial) {
    PoolConfig c;
    const int64_t h = 2 + static_cast<int64_t>(rng.uniform(0, 12)),
                  w = 2 + static_cast<int64_t>(rng.uniform(0, 12));
    c.kernel_h = 1 + static_cast<int64_t>(rng.uniform(0, std::min<int64_t>(h, 4)));
    c.kernel_w = 1 + static_cast<int64_t>(rng.uniform(0, std::min<int64_t>(w, 4)));
    c.stride_h = 1 + static_cast<int64_t>(rng.uniform(0, 2.99f));
    c.stride_w = 1 + static_cast<int64_t>(rng.uniform(0, 2.99f));
    c.pad_h = static_cast<int64_t>(rng.uniform(0, c.kernel_h / 2 + 0.99f));
    c.pad_w = static_cast<int64_t>(rng.uniform(0, c.kernel_w / 2 + 0.99f));
    if (trial % 4 == 0) c = PoolConfig{};  // the 2x2 stride-2 fast path
    CAPTURE(trial);
    const Shape in{3, h, w};
    Harness mx(std::make_unique<MaxPool>("m", c), in, 2, rng);
    mx.forward();
    CHECK(maxRelDiff(mx.y, naivePool(mx.x, c, true)) == 0.0);
    Harness av(std::make_unique<AvgPool>("a", c), in, 2, rng);
    av.forward();
    CHECK(maxRelDiff(av.y, naivePool(av.x, c, false)) < 1e-6);
  }
}

TEST_CASE("max_pool propagates NaN") {
  Rng rng(23);
  Harness h(std::make_unique<MaxPool>("m", PoolConfig{}), Shape{1, 4, 4}, 1, rng);
  h.x.fill(1.0f);
  h.x.data()[5] = std::nanf("");
  h.forward();
  CHECK(std::isnan(h.y.data()[0]));
  CHECK(h.y.data()[1] == 1.0f);
}

TEST_CASE("fused relu equals the layer followed by a relu layer") {
  Rng rng(24);
  struct Case {
    std::function<std::unique_ptr<Layer>()> make;
    Shape in;
    bool has_dx;
  };
  auto convOf = [](ConvAlgo algo, int64_t stride) {
    return [=] {
      Conv2dConfig c;
      c.filters = 5;
      c.pad_h = c.pad_w = 1;
      c.stride_h = c.stride_w = stride;
      c.algo = algo;
      return std::unique_ptr<Layer>(std::make_unique<Conv2d>("c", c));
    };
  };
  const Case cases[] = {
      {convOf(ConvAlgo::Winograd2x2, 1), Shape{4, 9, 7}, true},
      {convOf(ConvAlgo::Winograd2x2, 1), Shape{4, 9, 7}, false},
      {convOf(ConvAlgo::Winograd4x4, 1), Shape{4, 9, 7}, true},
      {convOf(ConvAlgo::Winograd4x4, 1), Shape{4, 9, 7}, false},
      {convOf(ConvAlgo::Im2col, 1), Shape{3, 8, 7}, true},
      {convOf(ConvAlgo::Im2col, 2), Shape{3, 8, 7}, false},
      {[] {
         return std::unique_ptr<Layer>(
             std::make_unique<Dense>("d", DenseConfig{6, true, InitKind::HeNormal}));
       },
       Shape{9}, true},
  };
  for (const Case& k : cases) {
    CAPTURE(k.in.str());
    // Same seed twice: identical parameters, inputs and output gradients.
    Rng ra(7), rb(7);
    Harness plain(k.make(), k.in, 3, ra);
    auto fused_layer = k.make();
    Harness fused(std::move(fused_layer), k.in, 3, rb);
    // fuseActivation is called before bind in a model; here after setup and bind is equivalent.
    REQUIRE(fused.layer->fuseActivation("relu"));
    CHECK_FALSE(fused.layer->fuseActivation("relu"));
    CHECK(fused.layer->describe().find("relu fused") != std::string::npos);

    Relu relu("r");
    relu.setup({plain.out_shape});
    plain.forward();
    Tensor act = Tensor::empty(plain.y.shape());
    relu.forward({&plain.y}, act, {});
    fused.forward();
    CHECK(maxRelDiff(fused.y, act) == 0.0);

    Tensor dpre = Tensor::empty(plain.y.shape());
    relu.backward({&plain.y}, act, fused.dy, {&dpre}, {});
    plain.dy.copyFrom(dpre);
    plain.backward({}, k.has_dx);
    fused.backward({}, k.has_dx);
    for (size_t i = 0; i < plain.grads.size(); ++i) CHECK(maxRelDiff(fused.grads[i], plain.grads[i]) < 1e-6);
    if (k.has_dx) CHECK(maxRelDiff(fused.dx, plain.dx) < 1e-6);
  }
  Relu r("r");
  CHECK_FALSE(r.fuseActivation("relu"));
  Dense d("d", DenseConfig{3, true, InitKind::HeNormal});
  CHECK_FALSE(d.fuseActivation("sigmoid"));
}

TEST_CASE("max_pool backward routes each gradient to its window's first maximum") {
  // Wide and tall odd planes exercise the vectorised 2x2 path's several
  // chunks per row and its uncovered last row and column.
  Rng rng(25);
  const std::pair<Shape, PoolConfig> cases[] = {{Shape{3, 37, 35}, PoolConfig{}},
                                                {Shape{2, 16, 34}, PoolConfig{}},
                                                {Shape{2, 9, 11}, PoolConfig{3, 3, 2, 2, 1, 1}}};
  for (const auto& [in, c] : cases) {
    CAPTURE(in.str());
    Harness h(std::make_unique<MaxPool>("m", c), in, 2, rng);
    rng.fill(h.x);
    // Ties on purpose: the first maximum in scan order must win.
    for (int64_t i = 0; i < h.x.numel(); i += 7) h.x.data()[i] = 0.5f;
    h.forward();
    h.dx.fill(1e9f);
    h.backward();
    Tensor ref = Tensor::zeros(h.x.shape());
    const int64_t ho = h.out_shape[1], wo = h.out_shape[2], hh = in[1], ww = in[2];
    for (int64_t p = 0; p < 2 * in[0]; ++p)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          int64_t best = -1;
          for (int64_t i = 0; i < c.kernel_h; ++i)
            for (int64_t j = 0; j < c.kernel_w; ++j) {
              const int64_t iy = oy * c.stride_h - c.pad_h + i, ix = ox * c.stride_w - c.pad_w + j;
              if (iy < 0 || iy >= hh || ix < 0 || ix >= ww) continue;
              const int64_t at = (p * hh + iy) * ww + ix;
              if (best < 0 || h.x.data()[at] > h.x.data()[best]) best = at;
            }
          const int64_t o = (p * ho + oy) * wo + ox;
          CHECK(h.y.data()[o] == h.x.data()[best]);
          ref.data()[best] += h.dy.data()[o];
        }
    CHECK(maxRelDiff(h.dx, ref) < 1e-6);
  }
}

TEST_CASE("max_pool at inference gives the same output without recording indices") {
  Rng rng(26);
  for (const PoolConfig& c : {PoolConfig{}, PoolConfig{3, 3, 2, 2, 1, 1}}) {
    Harness h(std::make_unique<MaxPool>("m", c), Shape{3, 11, 9}, 2, rng);
    h.forward();
    Tensor train = Tensor::empty(h.y.shape());
    train.copyFrom(h.y);
    LayerContext eval;
    eval.training = false;
    h.y.fill(0.0f);
    h.forward(eval);
    CHECK(maxRelDiff(h.y, train) == 0.0);
  }
}
