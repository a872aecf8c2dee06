#include "nn_test_util.h"

#include <algorithm>
#include <numeric>

namespace dtrain::test {

void fillDistinct(Tensor& t, Rng& rng, float gap) {
  const int64_t n = t.numel();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng.engine());
  for (int64_t i = 0; i < n; ++i) {
    // Ranks centred on zero, the zero rank skipped: values are +-(k + 0.5) * gap.
    const float v = (static_cast<float>(order[i]) - static_cast<float>(n) / 2.0f);
    t.data()[i] = (v >= 0 ? v + 0.5f : v - 0.5f) * gap;
  }
}

Harness::Harness(std::unique_ptr<Layer> l, const Shape& input, int64_t n, Rng& rng)
    : Harness(std::move(l), std::vector<Shape>{input}, n, rng) {}

Harness::Harness(std::unique_ptr<Layer> l, const std::vector<Shape>& inputs, int64_t n, Rng& rng)
    : layer(std::move(l)), in_shape(inputs.at(0)), in_shapes(inputs), batch(n) {
  out_shape = layer->setup(in_shapes);
  for (const ParamSpec& spec : layer->paramSpecs()) {
    Tensor p = Tensor::empty(spec.shape);
    rng.fill(p, 0.5f);
    params.push_back(p);
    grads.push_back(Tensor::zeros(spec.shape));
  }
  layer->bind(params, grads);
  for (const Shape& s : in_shapes) {
    xs.push_back(Tensor::empty(s.withBatch(n)));
    rng.fill(xs.back());
  }
  x = xs[0];
  y = Tensor::empty(out_shape.withBatch(n));
  dy = Tensor::empty(out_shape.withBatch(n));
  rng.fill(dy);
  for (const Shape& s : in_shapes) dxs.push_back(Tensor::empty(s.withBatch(n)));
  dx = dxs[0];
}

void Harness::forward(const LayerContext& ctx) {
  std::vector<const Tensor*> in;
  for (const Tensor& t : xs) in.push_back(&t);
  layer->forward(in, y, ctx);
}

void Harness::backward(const LayerContext& ctx, bool want_dx) {
  backwardFor(std::vector<bool>(xs.size(), want_dx), ctx);
}

void Harness::backwardFor(const std::vector<bool>& wanted, const LayerContext& ctx) {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> din;
  for (size_t i = 0; i < xs.size(); ++i) {
    in.push_back(&xs[i]);
    din.push_back(wanted.at(i) ? &dxs[i] : nullptr);
  }
  layer->backward(in, y, dy, din, ctx);
}

void Harness::zeroGrads() {
  for (Tensor& g : grads) g.zero();
}

double dotLoss(const Tensor& y, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

namespace {

void checkTensor(Harness& h, const std::string& name, Tensor& value, const Tensor& analytic, Rng& rng,
                 const LayerContext& ctx, float eps, double atol, double rtol, int64_t max_per_tensor,
                 GradCheckResult& result) {
  std::vector<int64_t> idx(static_cast<size_t>(value.numel()));
  std::iota(idx.begin(), idx.end(), 0);
  if (static_cast<int64_t>(idx.size()) > max_per_tensor) {
    std::shuffle(idx.begin(), idx.end(), rng.engine());
    idx.resize(static_cast<size_t>(max_per_tensor));
  }
  for (int64_t i : idx) {
    float* p = value.data() + i;
    const float saved = *p;
    *p = saved + eps;
    h.forward(ctx);
    const double plus = dotLoss(h.y, h.dy);
    *p = saved - eps;
    h.forward(ctx);
    const double minus = dotLoss(h.y, h.dy);
    *p = saved;
    const double numeric = (plus - minus) / (2.0 * static_cast<double>(eps));
    const double a = analytic.data()[i];
    const double score = std::fabs(numeric - a) / (atol + rtol * std::fabs(a));
    ++result.checked;
    if (score > result.worst) {
      result.worst = score;
      result.where = name + "[" + std::to_string(i) + "]: numeric " + std::to_string(numeric) +
                     ", analytic " + std::to_string(a);
    }
  }
}

}  // namespace

GradCheckResult gradCheck(Harness& h, Rng& rng, const LayerContext& ctx, float eps, double atol, double rtol,
                          int64_t max_per_tensor, bool check_inputs) {
  // Analytic gradients of L = sum(y * dy): the harness's dy plays R.
  h.zeroGrads();
  h.forward(ctx);
  h.backward(ctx, true);
  std::vector<Tensor> analytic;
  for (const Tensor& g : h.grads) {
    Tensor copy = Tensor::empty(g.shape());
    copy.copyFrom(g);
    analytic.push_back(copy);
  }
  std::vector<Tensor> dxs;
  for (const Tensor& d : h.dxs) {
    dxs.push_back(Tensor::empty(d.shape()));
    dxs.back().copyFrom(d);
  }

  GradCheckResult result;
  for (size_t i = 0; check_inputs && i < h.xs.size(); ++i)
    checkTensor(h, h.xs.size() == 1 ? "input" : "input " + std::to_string(i), h.xs[i], dxs[i], rng, ctx, eps,
                atol, rtol, max_per_tensor, result);
  const std::vector<ParamSpec> specs = h.layer->paramSpecs();
  for (size_t k = 0; k < h.params.size(); ++k)
    checkTensor(h, specs[k].name, h.params[k], analytic[k], rng, ctx, eps, atol, rtol, max_per_tensor,
                result);
  return result;
}

Tensor copyOf(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape());
  c.copyFrom(t);
  return c;
}

double maxRelDiff(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(
        worst, std::fabs(static_cast<double>(a.data()[i]) - b.data()[i]) / (1.0 + std::fabs(b.data()[i])));
  return worst;
}

}  // namespace dtrain::test
