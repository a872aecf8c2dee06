// batch_norm on the CPU: forward values against a double-precision reference
// (including a channel whose mean is 1000 times its spread), the running
// statistics, finite-difference gradients with and without a fused relu or
// relu6, a batch split across two threads giving the single-thread results,
// and the option errors.
//
// Finite differences: batch normalisation is smooth apart from the fused
// activation's kinks, so central differences of L = sum(y * R) (in double)
// with eps = 3e-3 have a truncation error of order eps^2 ~ 1e-5 and a
// round-off error of about 1e-4 (float outputs, 1e-7 relative, summed over a
// channel and divided by 2 eps). The tolerance |numeric - analytic| <= 2e-3 +
// 2e-3 |analytic| leaves an order of magnitude over both while an indexing or
// formula error shows as O(1). A perturbation that moves any output across a
// kink (activation pattern at x +- eps differs from the one at x) is skipped:
// there the difference quotient is not the derivative; the tests check that
// few are skipped.
#include "core/nn/layers/batch_norm.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "nn_test_util.h"

using namespace dtrain;
using dtrain::test::copyOf;
using ops::FusedActivation;

namespace {

// ------------------------------------------------------------ harness --

void fillNormal(Tensor& t, std::mt19937& rng, float mean = 0.0f, float stddev = 1.0f) {
  std::normal_distribution<float> normal(mean, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = normal(rng);
}

void fillUniform(Tensor& t, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
}

Tensor initialised(const ParamSpec& spec) {
  Tensor t = Tensor::empty(spec.shape);
  t.fill(spec.init == InitKind::Ones ? 1.0f : 0.0f);
  return t;
}

// One batch_norm with its parameters (as initialised), zeroed gradients,
// buffers (as initialised), a random input and a random output gradient.
struct Harness {
  BatchNorm layer;
  Shape sample;
  int64_t batch;
  int64_t channels, plane;
  std::vector<Tensor> params, grads, buffers;
  Tensor x, y, dy, dx;

  Harness(BatchNormConfig config, const Shape& s, int64_t n, std::mt19937& rng,
          FusedActivation act = FusedActivation::None)
      : layer("bn", config), sample(s), batch(n) {
    REQUIRE(layer.setup({s}) == s);
    if (act == FusedActivation::Relu) REQUIRE(layer.fuseActivation("relu"));
    if (act == FusedActivation::Relu6) REQUIRE(layer.fuseActivation("relu6"));
    channels = s[0];
    plane = s.numel() / channels;
    for (const ParamSpec& spec : layer.paramSpecs()) {
      params.push_back(initialised(spec));
      grads.push_back(Tensor::zeros(spec.shape));
    }
    for (const ParamSpec& spec : layer.bufferSpecs()) buffers.push_back(initialised(spec));
    layer.bind(params, grads);
    layer.bindBuffers(buffers);
    x = Tensor::empty(s.withBatch(n));
    fillNormal(x, rng);
    y = Tensor::empty(s.withBatch(n));
    dy = Tensor::empty(s.withBatch(n));
    fillNormal(dy, rng);
    dx = Tensor::empty(s.withBatch(n));
  }

  void forward(const LayerContext& ctx) { layer.forward({&x}, y, ctx); }
  void backward(const LayerContext& ctx) { layer.backward({&x}, y, dy, {&dx}, ctx); }
  Tensor& gamma() { return params.at(0); }
  Tensor& beta() { return params.at(1); }
  Tensor& runningMean() { return buffers.at(0); }
  Tensor& runningVar() { return buffers.at(1); }
  float at(const Tensor& t, int64_t s, int64_t c, int64_t i) const {
    return t.data()[(s * channels + c) * plane + i];
  }
};

LayerContext training() { return LayerContext{}; }
LayerContext inference() {
  LayerContext ctx;
  ctx.training = false;
  return ctx;
}

// ---------------------------------------------------------- reference --

struct Moments {
  std::vector<double> mean, var;  // var: biased
};

Moments referenceMoments(const Harness& h, const Tensor& x) {
  Moments m{std::vector<double>(h.channels, 0.0), std::vector<double>(h.channels, 0.0)};
  const double count = static_cast<double>(h.batch * h.plane);
  for (int64_t c = 0; c < h.channels; ++c) {
    for (int64_t s = 0; s < h.batch; ++s)
      for (int64_t i = 0; i < h.plane; ++i) m.mean[c] += h.at(x, s, c, i);
    m.mean[c] /= count;
    for (int64_t s = 0; s < h.batch; ++s)
      for (int64_t i = 0; i < h.plane; ++i) m.var[c] += std::pow(h.at(x, s, c, i) - m.mean[c], 2);
    m.var[c] /= count;
  }
  return m;
}

double activate(double v, FusedActivation act) {
  if (act == FusedActivation::None) return v;
  v = std::max(v, 0.0);
  return act == FusedActivation::Relu6 ? std::min(v, 6.0) : v;
}

// The largest |y - reference| / (1 + |reference|) for y = act((x - mean) /
// sqrt(var + eps) * gamma + beta).
double worstOutputError(const Harness& h, const Moments& m, double eps, const float* gamma, const float* beta,
                        FusedActivation act = FusedActivation::None) {
  double worst = 0.0;
  for (int64_t s = 0; s < h.batch; ++s)
    for (int64_t c = 0; c < h.channels; ++c)
      for (int64_t i = 0; i < h.plane; ++i) {
        const double xhat = (h.at(h.x, s, c, i) - m.mean[c]) / std::sqrt(m.var[c] + eps);
        const double want = activate(xhat * (gamma ? gamma[c] : 1.0) + (beta ? beta[c] : 0.0), act);
        worst = std::max(worst, std::fabs(h.at(h.y, s, c, i) - want) / (1.0 + std::fabs(want)));
      }
  return worst;
}

// ------------------------------------------------ finite differences --

// 0 below the activation's lower kink, 2 at relu6's upper clip, 1 between.
std::vector<int> activationPattern(const Tensor& y, FusedActivation act) {
  std::vector<int> p(static_cast<size_t>(y.numel()), 1);
  if (act == FusedActivation::None) return p;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float v = y.data()[i];
    p[i] = v <= 0.0f ? 0 : (act == FusedActivation::Relu6 && v >= 6.0f ? 2 : 1);
  }
  return p;
}

double dotLoss(const Tensor& y, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

struct GradCheck {
  double worst = 0.0;  // largest |numeric - analytic| / (atol + rtol |analytic|); <= 1 passes
  std::string where;
  int64_t checked = 0, skipped = 0;
};

GradCheck gradCheck(Harness& h, FusedActivation act, const LayerContext& ctx, double eps = 3e-3,
                    double atol = 2e-3, double rtol = 2e-3) {
  for (Tensor& g : h.grads) g.zero();
  h.forward(ctx);
  h.backward(ctx);
  const std::vector<int> pattern = activationPattern(h.y, act);
  std::vector<std::pair<std::string, Tensor*>> values{{"input", &h.x}};
  std::vector<Tensor> analytic{copyOf(h.dx)};
  const std::vector<ParamSpec> specs = h.layer.paramSpecs();
  for (size_t k = 0; k < h.params.size(); ++k) {
    values.push_back({specs[k].name, &h.params[k]});
    analytic.push_back(copyOf(h.grads[k]));
  }
  GradCheck r;
  // (Training passes move the running statistics, which their outputs do not read.)
  for (size_t v = 0; v < values.size(); ++v) {
    Tensor& t = *values[v].second;
    for (int64_t i = 0; i < t.numel(); ++i) {
      float* p = t.data() + i;
      const float saved = *p;
      *p = static_cast<float>(saved + eps);
      h.forward(ctx);
      const double plus = dotLoss(h.y, h.dy);
      const bool kink_plus = activationPattern(h.y, act) != pattern;
      *p = static_cast<float>(saved - eps);
      h.forward(ctx);
      const double minus = dotLoss(h.y, h.dy);
      const bool kink_minus = activationPattern(h.y, act) != pattern;
      *p = saved;
      if (kink_plus || kink_minus) {
        ++r.skipped;
        continue;
      }
      const double numeric = (plus - minus) / (2.0 * eps), a = analytic[v].data()[i];
      const double score = std::fabs(numeric - a) / (atol + rtol * std::fabs(a));
      ++r.checked;
      if (score > r.worst) {
        r.worst = score;
        r.where = values[v].first + "[" + std::to_string(i) + "]: numeric " + std::to_string(numeric) +
                  ", analytic " + std::to_string(a);
      }
    }
  }
  return r;
}

// ------------------------------------------- a reducer of two threads --

// Sums the vectors of `parties` threads: each call blocks until all have
// called, then every caller gets the element-wise sum (added in arrival
// order; for two parties the order does not change a sum). A party that
// waits more than 20 s gives up and marks the reducer failed.
class BarrierSum {
 public:
  explicit BarrierSum(int parties) : parties_(parties) {}

  void sum(double* data, int64_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (arrived_ == 0)
      accumulated_.assign(data, data + n);
    else if (static_cast<int64_t>(accumulated_.size()) != n)
      failed_ = true;
    else
      for (int64_t i = 0; i < n; ++i) accumulated_[i] += data[i];
    const uint64_t round = round_;
    if (++arrived_ == parties_) {
      // A second vector: a party of this round may still be copying out when
      // another has started accumulating the next round.
      result_ = accumulated_;
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else if (!changed_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
      failed_ = true;
      return;
    }
    std::copy(result_.begin(), result_.begin() + std::min<int64_t>(n, result_.size()), data);
  }
  bool failed() const { return failed_; }

 private:
  const int parties_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<double> accumulated_, result_;
  bool failed_ = false;
};

// One thread's door to a BarrierSum; records the sizes it was asked to sum.
class Party : public StatsReducer {
 public:
  explicit Party(BarrierSum& barrier) : barrier_(barrier) {}
  void allReduceSum(double* data, int64_t n) override {
    sizes.push_back(n);
    barrier_.sum(data, n);
  }
  std::vector<int64_t> sizes;

 private:
  BarrierSum& barrier_;
};

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a.data()[i]) - b.data()[i]));
  return worst;
}

// ------------------------------------------------------------ options --

LayerOptions opts(std::initializer_list<std::pair<std::string, LayerOptions::Value>> entries) {
  LayerOptions o("bn", "batch_norm", SourcePos{"job.toml", 30, 1});
  int line = 31;
  for (const auto& [key, value] : entries) o.set(key, value, SourcePos{"job.toml", line++, 1});
  return o;
}

std::string configError(const LayerOptions& o) {
  try {
    builtinLayers().create("batch_norm", "bn", o, LayerDefaults{});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("batch_norm training: every channel normalised to mean 0 and variance 1, as the reference") {
  struct Case {
    Shape sample;
    int64_t batch;
  };
  // A plane of 1200 spans two of the CPU's float-lane blocks; [C] runs along rows.
  const Case cases[] = {{Shape{3, 5, 4}, 6}, {Shape{2, 40, 30}, 2}, {Shape{7}, 9}};
  std::mt19937 rng(5);
  // The statistics are summed shifted by the running mean: at its initial 0,
  // channel 0's shift is 1000 spreads from its mean (the layer then sums the
  // deviations from the mean in a second round); near the batch mean (a
  // trained layer) one round is exact enough.
  for (const Case& k : cases)
    for (bool trained_shift : {false, true}) {
      CAPTURE(k.sample.str());
      CAPTURE(trained_shift);
      Harness h(BatchNormConfig{}, k.sample, k.batch, rng);
      // Channel c: mean 1000 for c = 0 (1000 times the spread: E[x^2] - mean^2
      // in float would have nothing left), else offsets and spreads that differ.
      for (int64_t s = 0; s < h.batch; ++s)
        for (int64_t c = 0; c < h.channels; ++c)
          for (int64_t i = 0; i < h.plane; ++i) {
            float& v = h.x.data()[(s * h.channels + c) * h.plane + i];
            v = c == 0 ? 1000.0f + v : static_cast<float>(c) * 3.0f - 4.0f + v * (0.5f + c);
          }
      const Moments m = referenceMoments(h, h.x);
      if (trained_shift)
        for (int64_t c = 0; c < h.channels; ++c)
          h.runningMean().data()[c] = static_cast<float>(m.mean[c] + 0.7 * std::sqrt(m.var[c]));
      h.forward(training());
      CHECK(worstOutputError(h, m, 1e-5, nullptr, nullptr) < 1e-4);
      // The mean is rounded to float before x - mean, which at 1000 moves the
      // outputs by up to half a float step of 1000, 3e-5 (the inputs' own
      // rounding there is twice that).
      const Moments out = referenceMoments(h, h.y);
      for (int64_t c = 0; c < h.channels; ++c) {
        CAPTURE(c);
        CHECK(std::fabs(out.mean[c]) < (c == 0 ? 1e-4 : 1e-5));
        CHECK(out.var[c] == doctest::Approx(m.var[c] / (m.var[c] + 1e-5)).epsilon(1e-4));
      }
    }
}

TEST_CASE("batch_norm training with gamma and beta, and with a fused relu or relu6, equals the reference") {
  std::mt19937 rng(6);
  for (FusedActivation act : {FusedActivation::None, FusedActivation::Relu, FusedActivation::Relu6}) {
    for (const Shape& sample : {Shape{4, 3, 5}, Shape{6}}) {
      CAPTURE(static_cast<int>(act));
      CAPTURE(sample.str());
      BatchNormConfig config;
      config.epsilon = 1e-3;
      Harness h(config, sample, 5, rng, act);
      fillUniform(h.gamma(), rng, 2.0f, 4.0f);  // outputs on both sides of 0 and past 6
      fillUniform(h.beta(), rng, 1.0f, 3.0f);
      h.forward(training());
      CHECK(worstOutputError(h, referenceMoments(h, h.x), 1e-3, h.gamma().data(), h.beta().data(), act) <
            1e-5);
    }
  }
}

TEST_CASE("batch_norm running statistics follow PyTorch's rule; inference normalises with them") {
  std::mt19937 rng(7);
  for (const Shape& sample : {Shape{3, 4, 2}, Shape{5}}) {
    CAPTURE(sample.str());
    BatchNormConfig config;
    config.momentum = 0.3;
    Harness h(config, sample, 6, rng);
    fillUniform(h.gamma(), rng, 0.5f, 1.5f);
    fillUniform(h.beta(), rng, -0.5f, 0.5f);
    const double count = static_cast<double>(h.batch * h.plane);
    std::vector<double> rm(h.channels, 0.0), rv(h.channels, 1.0);
    for (int step = 0; step < 2; ++step) {
      fillNormal(h.x, rng, step ? 2.0f : -1.0f, step ? 0.5f : 3.0f);
      const Moments m = referenceMoments(h, h.x);
      for (int64_t c = 0; c < h.channels; ++c) {
        rm[c] = 0.7 * rm[c] + 0.3 * m.mean[c];
        rv[c] = 0.7 * rv[c] + 0.3 * m.var[c] * count / (count - 1.0);  // unbiased
      }
      h.forward(training());
    }
    for (int64_t c = 0; c < h.channels; ++c) {
      CAPTURE(c);
      CHECK(h.runningMean().data()[c] == doctest::Approx(rm[c]).epsilon(1e-5));
      CHECK(h.runningVar().data()[c] == doctest::Approx(rv[c]).epsilon(1e-5));
    }

    // A replica that does not own the buffers, and inference, leave them alone.
    const Tensor mean_before = copyOf(h.runningMean()), var_before = copyOf(h.runningVar());
    LayerContext other = training();
    other.updates_buffers = false;
    h.forward(other);
    fillNormal(h.x, rng, 1.0f, 2.0f);
    h.forward(inference());
    CHECK(maxAbsDiff(h.runningMean(), mean_before) == 0.0);
    CHECK(maxAbsDiff(h.runningVar(), var_before) == 0.0);

    Moments running{std::vector<double>(h.channels), std::vector<double>(h.channels)};
    for (int64_t c = 0; c < h.channels; ++c) {
      running.mean[c] = h.runningMean().data()[c];
      running.var[c] = h.runningVar().data()[c];
    }
    CHECK(worstOutputError(h, running, 1e-5, h.gamma().data(), h.beta().data()) < 1e-5);
  }
}

TEST_CASE("batch_norm gradients equal finite differences ([C,H,W] and [C]; none, relu, relu6)") {
  std::mt19937 rng(8);
  for (FusedActivation act : {FusedActivation::None, FusedActivation::Relu, FusedActivation::Relu6}) {
    for (const Shape& sample : {Shape{3, 4, 5}, Shape{6}}) {
      CAPTURE(static_cast<int>(act));
      CAPTURE(sample.str());
      Harness h(BatchNormConfig{}, sample, sample.rank() == 1 ? 7 : 3, rng, act);
      const bool relu6 = act == FusedActivation::Relu6;
      fillUniform(h.gamma(), rng, relu6 ? 2.5f : 0.5f, relu6 ? 3.5f : 1.5f);
      fillUniform(h.beta(), rng, relu6 ? 1.5f : -0.5f, relu6 ? 2.5f : 0.5f);
      const GradCheck r = gradCheck(h, act, training());
      INFO("worst: " << r.where);
      CHECK(r.checked > 0);
      CHECK(r.skipped * 20 <= r.checked);
      CHECK(r.worst <= 1.0);
      if (relu6) {  // both kinks are exercised
        const std::vector<int> p = activationPattern(h.y, act);
        CHECK(std::count(p.begin(), p.end(), 0) > 0);
        CHECK(std::count(p.begin(), p.end(), 2) > 0);
      }
    }
  }
}

TEST_CASE("batch_norm gradients without gamma and beta, and of an inference pass, equal finite differences") {
  std::mt19937 rng(9);
  BatchNormConfig bare;
  bare.scale = bare.center = false;
  Harness plain(bare, Shape{2, 3, 3}, 4, rng, FusedActivation::Relu);
  CHECK(plain.params.empty());
  GradCheck r = gradCheck(plain, FusedActivation::Relu, training());
  INFO("worst: " << r.where);
  CHECK(r.checked > 0);
  CHECK(r.skipped * 20 <= r.checked);
  CHECK(r.worst <= 1.0);

  // At inference the statistics are constants: dx = gamma * invstd * dy.
  Harness frozen(BatchNormConfig{}, Shape{3, 2, 2}, 3, rng, FusedActivation::Relu6);
  fillUniform(frozen.gamma(), rng, 2.5f, 3.5f);
  fillUniform(frozen.beta(), rng, 1.5f, 2.5f);
  fillNormal(frozen.runningMean(), rng, 0.0f, 0.3f);
  fillUniform(frozen.runningVar(), rng, 0.5f, 1.5f);
  r = gradCheck(frozen, FusedActivation::Relu6, inference());
  INFO("worst: " << r.where);
  CHECK(r.checked > 0);
  CHECK(r.skipped * 20 <= r.checked);
  CHECK(r.worst <= 1.0);
}

TEST_CASE("batch_norm over a batch split across two threads equals one layer over the whole batch") {
  struct Case {
    Shape sample;
    FusedActivation act;
  };
  const Case cases[] = {{Shape{3, 4, 5}, FusedActivation::Relu}, {Shape{6}, FusedActivation::None}};
  std::mt19937 rng(10);
  for (const Case& k : cases) {
    CAPTURE(k.sample.str());
    BatchNormConfig config;
    config.momentum = 0.2;
    // The single layer; its parameters and initial buffers are the split pair's too.
    Harness whole(config, k.sample, 8, rng, k.act);
    fillUniform(whole.gamma(), rng, 0.5f, 1.5f);
    fillUniform(whole.beta(), rng, -0.5f, 0.5f);
    std::vector<Tensor> buffers{copyOf(whole.runningMean()), copyOf(whole.runningVar())};

    BatchNorm first("bn", config), second("bn", config);
    std::vector<Tensor> grads_first, grads_second;
    for (BatchNorm* layer : {&first, &second}) {
      REQUIRE(layer->setup({k.sample}) == k.sample);
      if (k.act == FusedActivation::Relu) REQUIRE(layer->fuseActivation("relu"));
      std::vector<Tensor>& grads = layer == &first ? grads_first : grads_second;
      for (const Tensor& p : whole.params) grads.push_back(Tensor::zeros(p.shape()));
      layer->bind(whole.params, grads);
      layer->bindBuffers(buffers);
    }
    BarrierSum barrier(2);
    Party party_first(barrier), party_second(barrier);
    Tensor y = Tensor::empty(whole.y.shape()), dx = Tensor::empty(whole.dx.shape());

    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      // Steps 0 and 1: the running mean (the shift) is within a standard
      // deviation of the batch mean; step 2: 50 deviations away.
      if (step < 2)
        fillNormal(whole.x, rng, 0.5f, 2.0f);
      else
        fillNormal(whole.x, rng, 50.0f, 1.0f);
      fillNormal(whole.dy, rng);
      for (Tensor& g : whole.grads) g.zero();
      whole.forward(training());
      whole.backward(training());

      for (auto* grads : {&grads_first, &grads_second})
        for (Tensor& g : *grads) g.zero();
      auto run = [&](BatchNorm& layer, Party& party, int64_t start, int64_t len, bool owner) {
        LayerContext ctx;
        ctx.stats_reducer = &party;
        ctx.updates_buffers = owner;
        const Tensor x = whole.x.narrow(start, len), dy = whole.dy.narrow(start, len);
        Tensor out = y.narrow(start, len), din = dx.narrow(start, len);
        layer.forward({&x}, out, ctx);
        layer.backward({&x}, out, dy, {&din}, ctx);
      };
      std::thread t1([&] { run(first, party_first, 0, 5, true); });
      std::thread t2([&] { run(second, party_second, 5, 3, false); });
      t1.join();
      t2.join();
      REQUIRE_FALSE(barrier.failed());

      CHECK(maxAbsDiff(y, whole.y) <= 1e-5);
      CHECK(maxAbsDiff(dx, whole.dx) <= 1e-5);
      for (size_t p = 0; p < whole.grads.size(); ++p) {
        CAPTURE(p);
        Tensor summed = copyOf(grads_first[p]);
        summed.add(grads_second[p]);
        CHECK(maxAbsDiff(summed, whole.grads[p]) <= 1e-5);
      }
      CHECK(maxAbsDiff(buffers[0], whole.runningMean()) <= 1e-6);
      CHECK(maxAbsDiff(buffers[1], whole.runningVar()) <= 1e-6);
    }
    // Per step: [count, count * shift, shifted sums, their squares] forward (and
    // the squared deviations when the shift is far from the mean), the gradient
    // sums backward.
    const int64_t c = k.sample[0];
    const std::vector<int64_t> sizes{3 * c + 1, 2 * c, 3 * c + 1, 2 * c, 3 * c + 1, c, 2 * c};
    CHECK(party_first.sizes == sizes);
    CHECK(party_second.sizes == sizes);
  }
}

TEST_CASE("batch_norm: options, specs, fusion and description") {
  auto layer = builtinLayers().create(
      "batch_norm", "bn", opts({{"momentum", 0.01}, {"epsilon", 1e-3}, {"center", false}, {"scale", true}}),
      LayerDefaults{});
  CHECK(layer->type() == "batch_norm");
  CHECK(layer->setup({Shape{8, 5, 5}}) == Shape{8, 5, 5});
  const std::vector<ParamSpec> params = layer->paramSpecs();
  REQUIRE(params.size() == 1);
  CHECK(params[0].name == "weight");
  CHECK(params[0].shape == Shape{8});
  CHECK(params[0].init == InitKind::Ones);
  const std::vector<ParamSpec> buffers = layer->bufferSpecs();
  REQUIRE(buffers.size() == 2);
  CHECK(buffers[0].name == "running_mean");
  CHECK(buffers[0].init == InitKind::Zeros);
  CHECK(buffers[1].name == "running_var");
  CHECK(buffers[1].init == InitKind::Ones);
  CHECK(layer->describe() == "momentum 0.01, epsilon 0.001, no center");
  CHECK(layer->forwardFlops() == 2 * 8 * 25);
  CHECK_FALSE(layer->fuseActivation("sigmoid"));
  CHECK(layer->fuseActivation("relu6"));
  CHECK_FALSE(layer->fuseActivation("relu"));  // one activation only
  CHECK(layer->describe() == "momentum 0.01, epsilon 0.001, no center, relu6 fused");
  CHECK(layer->forwardFlops() == 3 * 8 * 25);

  auto defaults = builtinLayers().create("batch_norm", "bn", opts({}), LayerDefaults{});
  CHECK(defaults->setup({Shape{4}}) == Shape{4});
  CHECK(defaults->paramSpecs().size() == 2);
  CHECK(defaults->paramSpecs()[1].name == "bias");
  CHECK(defaults->paramSpecs()[1].init == InitKind::Zeros);
  CHECK(defaults->describe() == "momentum 0.1, epsilon 1e-05");
  CHECK_THROWS_AS(defaults->setup({Shape{4, 5}}), ShapeError);
}

TEST_CASE("batch_norm: option errors name the option, its value and its position") {
  std::string msg = configError(opts({{"momentum", 1.5}}));
  CHECK(contains(msg, "job.toml:31:1"));
  CHECK(contains(msg, "'bn' momentum must be in [0, 1] (got 1.5)"));
  msg = configError(opts({{"momentum", -0.1}}));
  CHECK(contains(msg, "momentum must be in [0, 1] (got -0.1)"));
  msg = configError(opts({{"epsilon", 0.0}}));
  CHECK(contains(msg, "'bn' epsilon must be > 0 (got 0)"));
  msg = configError(opts({{"epsilon", -1e-3}}));
  CHECK(contains(msg, "epsilon must be > 0 (got -0.001)"));
  msg = configError(opts({{"momentum", std::string("fast")}}));
  CHECK(contains(msg, "momentum"));
  msg = configError(opts({{"eps", 1e-3}}));
  CHECK(contains(msg, "unknown option 'eps'"));
  CHECK(contains(msg, "did you mean 'epsilon'"));
  CHECK(std::count(msg.begin(), msg.end(), '\n') == 0);

  try {
    BatchNormConfig bad;
    bad.momentum = 2.0;
    BatchNorm layer("bn", bad);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == "layer 'bn' (batch_norm): momentum must be in [0, 1] (got 2)");
  }
}

TEST_CASE("batch_norm: training on one value per channel fails with a clear message") {
  std::mt19937 rng(11);
  Harness features(BatchNormConfig{}, Shape{4}, 1, rng);
  try {
    features.forward(training());
    FAIL("no error");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) ==
          "layer 'bn' (batch_norm): training needs more than one value per channel, got 1 (the batch size); "
          "use a larger batch");
  }
  features.forward(inference());  // inference needs no batch statistics
  Harness images(BatchNormConfig{}, Shape{2, 3, 3}, 1, rng);
  images.forward(training());  // one sample, 9 values per channel
  CHECK(std::isfinite(images.y.data()[0]));
}
