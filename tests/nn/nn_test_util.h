// Shared helpers for the nn tests: a seeded RNG, a harness that owns a layer's
// parameters, gradients and activations, and a finite-difference gradient
// checker.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/nn/param_store.h"
#include "core/tensor/tensor.h"

namespace dtrain::test {

// Fixed-seed normal values.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  float normal() { return normal_(gen_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  void fill(Tensor& t, float scale = 1.0f) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = scale * normal();
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

// Fills t with distinct values in random order, spaced `gap` apart and pushed
// at least gap/2 away from zero: no max-pool ties and no relu kinks within a
// finite-difference step smaller than gap/2.
void fillDistinct(Tensor& t, Rng& rng, float gap = 0.05f);

// Owns one layer and everything it needs: random parameters (biases too, so
// their gradients are exercised), zeroed gradients, inputs, output, gradients.
// A layer of several inputs (add, concat) gets one x and dx per input in xs
// and dxs; x, dx and in_shape are the first input's (the same memory).
struct Harness {
  std::unique_ptr<Layer> layer;
  Shape in_shape, out_shape;
  std::vector<Shape> in_shapes;
  int64_t batch = 0;
  std::vector<Tensor> params, grads;
  std::vector<Tensor> xs, dxs;
  Tensor x, y, dy, dx;

  Harness(std::unique_ptr<Layer> l, const Shape& input, int64_t n, Rng& rng);
  Harness(std::unique_ptr<Layer> l, const std::vector<Shape>& inputs, int64_t n, Rng& rng);
  void forward(const LayerContext& ctx = {});
  // dxs receive the input gradients unless want_dx is false (then every din is null).
  void backward(const LayerContext& ctx = {}, bool want_dx = true);
  // Input i's gradient goes to dxs[i] where wanted[i], else its din is null.
  void backwardFor(const std::vector<bool>& wanted, const LayerContext& ctx = {});
  void zeroGrads();
};

// L = sum(y * r) in double.
double dotLoss(const Tensor& y, const Tensor& r);

struct GradCheckResult {
  double worst = 0.0;  // largest |numeric - analytic| / (atol + rtol * |analytic|); <= 1 passes
  std::string where;   // the worst element, for the failure message
  int64_t checked = 0;
};

// Checks the harness's input gradients and every parameter gradient against
// central differences of L = sum(y * R) for a fixed random R. Every element is
// checked when a tensor has at most max_per_tensor elements, else a random
// sample of that many; the inputs are skipped when !check_inputs (token ids,
// which have no gradient). See gradcheck_test.cpp for the choice of eps and tolerances.
GradCheckResult gradCheck(Harness& h, Rng& rng, const LayerContext& ctx = {}, float eps = 1e-2f,
                          double atol = 2e-3, double rtol = 2e-3, int64_t max_per_tensor = 400,
                          bool check_inputs = true);

// Every parameter of `store` (allocated) drawn from N(0, scale^2).
inline void fillParams(ParamStore& store, Rng& rng, float scale) {
  for (size_t i = 0; i < store.entries().size(); ++i) {
    Tensor value = store.view(store.params(), i);
    rng.fill(value, scale);
  }
}

// A copy of t with memory of its own.
Tensor copyOf(const Tensor& t);

// Max |a - b| / (1 + |b|) over all elements.
double maxRelDiff(const Tensor& a, const Tensor& b);

}  // namespace dtrain::test
