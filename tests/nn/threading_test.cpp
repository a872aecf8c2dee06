// Replicas on several threads: each thread owns its layer instances, the
// parameters are shared read-only. Results must equal a serial run exactly
// (no shared mutable state in layers or ops).
#include <doctest/doctest.h>

#include <thread>

#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/max_pool.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// conv (winograd 4x4) -> max_pool -> conv (im2col, stride 2) -> dense, with its
// own gradient buffers, over shared parameters.
struct Replica {
  Conv2d conv1{"c1", [] {
                 Conv2dConfig c;
                 c.filters = 6;
                 c.pad_h = c.pad_w = 1;
                 c.algo = ConvAlgo::Winograd4x4;
                 return c;
               }()};
  MaxPool pool{"p", PoolConfig{}};
  Conv2d conv2{"c2", [] {
                 Conv2dConfig c;
                 c.filters = 4;
                 c.stride_h = c.stride_w = 2;
                 return c;
               }()};
  Dense fc{"fc", DenseConfig{5, true, InitKind::HeNormal}};
  std::vector<Tensor> grads;
  Tensor a1, a2, a3, a4, d1, d2, d3, d4, dx;

  Replica(const std::vector<Tensor>& params, int64_t n) {
    Shape s = conv1.setup({Shape{4, 12, 10}});
    conv1.fuseActivation("relu");
    s = pool.setup({s});
    Shape s3 = conv2.setup({s});
    fc.setup({Shape{s3.numel()}});
    for (const Tensor& p : params) grads.push_back(Tensor::zeros(p.shape()));
    conv1.bind({params[0], params[1]}, {grads[0], grads[1]});
    conv2.bind({params[2], params[3]}, {grads[2], grads[3]});
    fc.bind({params[4], params[5]}, {grads[4], grads[5]});
    a1 = Tensor::empty(Shape{n, 6, 12, 10});
    a2 = Tensor::empty(Shape{n, 6, 6, 5});
    a3 = Tensor::empty(Shape{n, 4, 2, 2});
    a4 = Tensor::empty(Shape{n, 5});
    d1 = Tensor::empty(a1.shape());
    d2 = Tensor::empty(a2.shape());
    d3 = Tensor::empty(a3.shape());
    dx = Tensor::empty(Shape{n, 4, 12, 10});
  }

  void step(const Tensor& x, const Tensor& dy) {
    conv1.forward({&x}, a1, {});
    pool.forward({&a1}, a2, {});
    conv2.forward({&a2}, a3, {});
    Tensor flat = a3.reshape(Shape{a3.dim(0), 16});
    fc.forward({&flat}, a4, {});
    Tensor dflat = d3.reshape(flat.shape());
    fc.backward({&flat}, a4, dy, {&dflat}, {});
    conv2.backward({&a2}, a3, d3, {&d2}, {});
    pool.backward({&a1}, a2, d2, {&d1}, {});
    conv1.backward({&x}, a1, d1, {&dx}, {});
  }
};

}  // namespace

TEST_CASE("replicas on different threads give the serial results") {
  Rng rng(71);
  const std::vector<Shape> shapes = {Shape{6, 4, 3, 3}, Shape{6},     Shape{4, 6, 3, 3},
                                     Shape{4},          Shape{5, 16}, Shape{5}};
  std::vector<Tensor> params;
  for (const Shape& s : shapes) {
    params.push_back(Tensor::empty(s));
    rng.fill(params.back(), 0.3f);
  }
  const int64_t n = 5;
  const int kThreads = 4;
  std::vector<Tensor> xs, dys;
  for (int i = 0; i < kThreads; ++i) {
    xs.push_back(Tensor::empty(Shape{n, 4, 12, 10}));
    dys.push_back(Tensor::empty(Shape{n, 5}));
    rng.fill(xs.back());
    rng.fill(dys.back());
  }
  std::vector<std::unique_ptr<Replica>> serial, parallel;
  for (int i = 0; i < kThreads; ++i) {
    serial.push_back(std::make_unique<Replica>(params, n));
    parallel.push_back(std::make_unique<Replica>(params, n));
    serial.back()->step(xs[i], dys[i]);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) {
        for (Tensor& g : parallel[i]->grads) g.zero();
        parallel[i]->step(xs[i], dys[i]);
      }
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    CHECK(maxRelDiff(parallel[i]->a4, serial[i]->a4) == 0.0);
    CHECK(maxRelDiff(parallel[i]->dx, serial[i]->dx) == 0.0);
    for (size_t k = 0; k < params.size(); ++k)
      CHECK(maxRelDiff(parallel[i]->grads[k], serial[i]->grads[k]) == 0.0);
  }
}
