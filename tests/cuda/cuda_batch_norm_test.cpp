// batch_norm's CUDA layer against the CPU layer on fresh random inputs, on
// each of its paths: without a stats reducer cuDNN's and its own kernels'
// (each forced; unforced, the faster, timed without touching the layer's
// state), and with a reducer of one participant, which leaves the sums as
// they are, the reduced path. A fused residual add on each path. Training
// forward, running statistics, backward (parameter gradients accumulated onto
// non-zero values), inference forward and its backward; [C,H,W] and [C]
// inputs; fused relu and relu6; without gamma or beta; a running mean near
// the batch mean (one round of shifted sums) and far from it (a second round
// of squared deviations). With a reducer both layers must ask it for the same
// vectors in the same order (batch_norm_moments.h), so that CPU and GPU ranks
// can sum their statistics together. Then the reducer's meaning: a reducer
// standing for two replicas with the same slice (it doubles every sum) must
// give what the CPU layer gives on that slice twice.
// fp32, normwise relative error below 1e-4 (2e-5 for the running statistics,
// where a wrong unbiased factor would show as 1e-3).
#include "core/nn/cuda/cuda_batch_norm.h"

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/cuda/cuda_layers.h"
#include "tests/cuda/device_compare.h"

using namespace dtrain;
using namespace dtrain::testing;
using ops::FusedActivation;

namespace {

// One participant: the sums are already the batch's. Records the sizes asked.
class AloneReducer : public StatsReducer {
 public:
  void allReduceSum(double* data, int64_t n) override { sizes.push_back(n); }
  std::vector<int64_t> sizes;
};

// Two participants with identical data: every sum doubles. Reads and writes
// the device memory in the order of the context's stream.
class DoublingReducer : public StatsReducer {
 public:
  explicit DoublingReducer(CudaContext& ctx) : ctx_(ctx) {}
  void allReduceSum(double* data, int64_t n) override {
    std::vector<double> host(static_cast<size_t>(n));
    ctx_.copy(host.data(), data, host.size() * sizeof(double), true);
    for (double& v : host) v *= 2.0;
    ctx_.copy(data, host.data(), host.size() * sizeof(double), false);
    ctx_.synchronize();  // `host` goes away on return
  }

 private:
  CudaContext& ctx_;
};

struct Case {
  Shape sample;
  int64_t batch = 5;
  FusedActivation act = FusedActivation::None;
  bool reducer = false;
  // Without a reducer: the path forced on the GPU layer (none: it chooses).
  std::optional<BatchNormPath> path;
  bool residual = false;  // a fused add of a second input
  bool input_gradient = true;
  // Every channel's batch mean (the inputs are centred on it). The running
  // mean (the shift of the sums) starts within 0.3 of 0.5 and the inputs
  // spread over about 4: at 0.5 every channel's shift lies well within a
  // standard deviation (about 1.15) of its batch mean, at 20 every one lies
  // more than 16 beyond it.
  float mean = 0.5f;
  bool secondRound() const { return mean > 10.0f; }
  BatchNormConfig config;
};

void fuse(Layer& layer, FusedActivation act) {
  if (act == FusedActivation::Relu) REQUIRE(layer.fuseActivation("relu"));
  if (act == FusedActivation::Relu6) REQUIRE(layer.fuseActivation("relu6"));
}

// Host tensors and their GPU copies.
struct Pair {
  Tensor host, device;
  explicit Pair(Tensor h) : host(std::move(h)), device(host.to(gpuDevice())) {}
};

Tensor uniform(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

// Moves each channel's values of the batch x ([n, channels, plane]) so their
// mean is `mean`: whether the running mean lies near the batch mean is then
// the test's choice, not the draw's.
void centre(Tensor& x, int64_t channels, int64_t plane, float mean) {
  const int64_t n = x.dim(0);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < plane; ++i) sum += x.data()[(s * channels + c) * plane + i];
    const auto move = static_cast<float>(mean - sum / static_cast<double>(n * plane));
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < plane; ++i) x.data()[(s * channels + c) * plane + i] += move;
  }
}

void compare(const Case& c) {
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  std::mt19937 rng(4321);
  BatchNorm cpu("bn", c.config);
  CudaBatchNorm gpu(cpu, ctx);
  REQUIRE(cpu.setup({c.sample}) == c.sample);
  REQUIRE(gpu.setup({c.sample}) == c.sample);
  if (c.residual) {
    REQUIRE(cpu.fuseResidualAdd());
    REQUIRE(gpu.fuseResidualAdd());
  }
  fuse(cpu, c.act);
  fuse(gpu, c.act);
  if (c.path) gpu.forcePath(*c.path);
  const bool relu6 = c.act == FusedActivation::Relu6;

  std::vector<Pair> params, grads, buffers;
  for (const ParamSpec& spec : cpu.paramSpecs()) {
    // gamma in [2, 4] and beta in [1, 3] put relu6's outputs on both sides of each kink.
    const bool gamma = spec.name == "weight";
    params.emplace_back(uniform(spec.shape, rng, gamma ? (relu6 ? 2.0f : 0.5f) : (relu6 ? 1.0f : -0.5f),
                                gamma ? (relu6 ? 4.0f : 1.5f) : (relu6 ? 3.0f : 0.5f)));
    grads.emplace_back(randomHost(spec.shape, rng, 0.5f));
  }
  buffers.emplace_back(uniform(Shape{c.sample[0]}, rng, 0.2f, 0.8f));
  buffers.emplace_back(uniform(Shape{c.sample[0]}, rng, 0.5f, 1.5f));
  auto hosts = [](const std::vector<Pair>& v) {
    std::vector<Tensor> t;
    for (const Pair& p : v) t.push_back(p.host);
    return t;
  };
  auto devices = [](const std::vector<Pair>& v) {
    std::vector<Tensor> t;
    for (const Pair& p : v) t.push_back(p.device);
    return t;
  };
  cpu.bind(hosts(params), hosts(grads));
  gpu.bind(devices(params), devices(grads));
  cpu.bindBuffers(hosts(buffers));
  gpu.bindBuffers(devices(buffers));

  AloneReducer cpu_reducer, gpu_reducer;
  LayerContext cpu_ctx, gpu_ctx;
  if (c.reducer) {
    cpu_ctx.stats_reducer = &cpu_reducer;
    gpu_ctx.stats_reducer = &gpu_reducer;
  }
  const Shape batch_shape = c.sample.withBatch(c.batch);
  for (bool training : {true, false}) {
    CAPTURE(training);
    cpu_ctx.training = gpu_ctx.training = training;
    Tensor x = randomHost(batch_shape, rng, 2.0f);
    centre(x, c.sample[0], c.sample.numel() / c.sample[0], c.mean);  // a mean away from 0
    const Tensor x_gpu = x.to(gpuDevice());
    // The residual spreads as the normalised values do, so the sum crosses relu's kink.
    const Tensor r = randomHost(batch_shape, rng, 1.5f);
    const Tensor r_gpu = r.to(gpuDevice());
    std::vector<const Tensor*> in{&x}, in_gpu{&x_gpu};
    if (c.residual) {
      in.push_back(&r);
      in_gpu.push_back(&r_gpu);
    }
    Tensor y = Tensor::empty(batch_shape), y_gpu = Tensor::empty(batch_shape, gpuDevice());
    cpu.forward(in, y, cpu_ctx);
    gpu.forward(in_gpu, y_gpu, gpu_ctx);
    CHECK_MESSAGE(relativeError(y_gpu, y) < 1e-4, "forward");
    CHECK_MESSAGE(relativeError(buffers[0].device, buffers[0].host) < 2e-5, "running mean");
    CHECK_MESSAGE(relativeError(buffers[1].device, buffers[1].host) < 2e-5, "running variance");

    const Tensor g = randomHost(batch_shape, rng);
    const Tensor g_gpu = g.to(gpuDevice());
    Tensor dx = Tensor::zeros(batch_shape), dx_gpu = Tensor::zeros(batch_shape, gpuDevice());
    Tensor dr = Tensor::zeros(batch_shape), dr_gpu = Tensor::zeros(batch_shape, gpuDevice());
    std::vector<Tensor*> din{c.input_gradient ? &dx : nullptr}, din_gpu{c.input_gradient ? &dx_gpu : nullptr};
    if (c.residual) {
      din.push_back(&dr);
      din_gpu.push_back(&dr_gpu);
    }
    cpu.backward(in, y, g, din, cpu_ctx);
    gpu.backward(in_gpu, y_gpu, g_gpu, din_gpu, gpu_ctx);
    if (c.input_gradient) CHECK_MESSAGE(relativeError(dx_gpu, dx) < 1e-4, "input gradient");
    if (c.residual) CHECK_MESSAGE(relativeError(dr_gpu, dr) < 1e-4, "residual gradient");
    for (size_t i = 0; i < grads.size(); ++i)
      CHECK_MESSAGE(relativeError(grads[i].device, grads[i].host) < 1e-4, "parameter gradient " << i);
  }
  if (c.reducer) {
    // Training only (inference needs no batch statistics): [count, count * K,
    // sum (x - K), sum (x - K)^2], the squared deviations when K is far from
    // the mean, and backward's [sum g, sum g * (x - mean)] when dx is wanted.
    const int64_t ch = c.sample[0];
    std::vector<int64_t> sizes{1 + 3 * ch};
    if (c.secondRound()) sizes.push_back(ch);
    if (c.input_gradient) sizes.push_back(2 * ch);
    CHECK(gpu_reducer.sizes == sizes);
    CHECK(cpu_reducer.sizes == sizes);
  }
}

// Without a reducer: each forced path; with one: the reduced path.
std::vector<std::pair<bool, std::optional<BatchNormPath>>> paths() {
  return {{false, BatchNormPath::Cudnn}, {false, BatchNormPath::Own}, {true, std::nullopt}};
}

}  // namespace

TEST_CASE("cuda: batch_norm equals the CPU batch_norm through cuDNN and through its own kernels") {
  for (const auto& [reducer, path] : paths()) {
    for (FusedActivation act : {FusedActivation::None, FusedActivation::Relu, FusedActivation::Relu6}) {
      for (const Shape& sample : {Shape{6, 7, 9}, Shape{37}}) {
        CAPTURE(reducer);
        CAPTURE(path ? batchNormPathName(*path) : "reduced");
        CAPTURE(static_cast<int>(act));
        CAPTURE(sample.str());
        Case c;
        c.sample = sample;
        c.batch = sample.rank() == 1 ? 19 : 5;
        c.act = act;
        c.reducer = reducer;
        c.path = path;
        c.config.momentum = 0.5;  // the running statistics move a lot in one step
        compare(c);
      }
    }
  }
}

TEST_CASE("cuda: batch_norm with a fused residual add equals the CPU batch_norm on every path") {
  for (const auto& [reducer, path] : paths()) {
    for (FusedActivation act : {FusedActivation::None, FusedActivation::Relu}) {
      for (const Shape& sample : {Shape{6, 7, 9}, Shape{37}}) {
        CAPTURE(reducer);
        CAPTURE(path ? batchNormPathName(*path) : "reduced");
        CAPTURE(static_cast<int>(act));
        CAPTURE(sample.str());
        Case c;
        c.sample = sample;
        c.batch = sample.rank() == 1 ? 19 : 5;
        c.act = act;
        c.reducer = reducer;
        c.path = path;
        c.residual = true;
        c.config.momentum = 0.5;
        compare(c);
      }
    }
  }
}

TEST_CASE("cuda: batch_norm choosing its path by timing computes what the chosen path alone computes") {
  // The timing runs must leave the running statistics and the accumulated
  // parameter gradients alone: the step equals the CPU layer's single step.
  for (bool residual : {false, true}) {
    CAPTURE(residual);
    Case c;
    c.sample = Shape{16, 8, 8};
    c.batch = 6;
    c.act = FusedActivation::Relu;
    c.residual = residual;
    c.config.momentum = 0.5;
    compare(c);
  }
}

TEST_CASE("cuda: batch_norm with its running mean far from the batch mean equals the CPU batch_norm") {
  // The shifted sums cancel there: the CPU layer sums the squared deviations
  // from the mean in a second round, and so does the GPU layer with a reducer.
  // Without one, cuDNN's path needs no shift, and the own path's one round in
  // double loses far less than the tolerance (batchNormMomentsFromShiftedSums).
  for (const auto& [reducer, path] : paths()) {
    for (FusedActivation act : {FusedActivation::None, FusedActivation::Relu}) {
      for (const Shape& sample : {Shape{6, 7, 9}, Shape{37}}) {
        CAPTURE(reducer);
        CAPTURE(path ? batchNormPathName(*path) : "reduced");
        CAPTURE(static_cast<int>(act));
        CAPTURE(sample.str());
        Case c;
        c.sample = sample;
        c.batch = sample.rank() == 1 ? 19 : 5;
        c.act = act;
        c.reducer = reducer;
        c.path = path;
        c.mean = 20.0f;
        REQUIRE(c.secondRound());
        compare(c);
      }
    }
  }
}

TEST_CASE(
    "cuda: batch_norm without gamma or beta, and without an input gradient, equals the CPU batch_norm") {
  for (const auto& [reducer, path] : paths()) {
    CAPTURE(reducer);
    CAPTURE(path ? batchNormPathName(*path) : "reduced");
    Case no_center;
    no_center.sample = Shape{4, 6, 5};
    no_center.act = FusedActivation::Relu;
    no_center.reducer = reducer;
    no_center.path = path;
    no_center.config.center = false;
    compare(no_center);

    Case no_scale = no_center;
    no_scale.config.center = true;
    no_scale.config.scale = false;
    no_scale.input_gradient = false;
    compare(no_scale);

    Case bare;
    bare.sample = Shape{9};
    bare.batch = 11;
    bare.reducer = reducer;
    bare.path = path;
    bare.config.scale = bare.config.center = false;
    compare(bare);
  }
}

TEST_CASE("cuda: batch_norm with a reducer uses the summed statistics of every participant") {
  // The GPU layer computes slice X and the reducer doubles every sum: the
  // statistics are those of the batch [X; X], which the CPU layer computes
  // alone. The GPU's parameter gradients are its own part: half the CPU's.
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  struct Shapes {
    Shape sample;
    int64_t batch;
    FusedActivation act;
  };
  for (const Shapes& k :
       {Shapes{Shape{3, 5, 5}, 4, FusedActivation::Relu}, Shapes{Shape{6}, 7, FusedActivation::None}}) {
    CAPTURE(k.sample.str());
    std::mt19937 rng(99);
    BatchNorm cpu("bn", BatchNormConfig{});
    CudaBatchNorm gpu(cpu, ctx);
    REQUIRE(cpu.setup({k.sample}) == k.sample);
    REQUIRE(gpu.setup({k.sample}) == k.sample);
    fuse(cpu, k.act);
    fuse(gpu, k.act);
    const Shape channel{k.sample[0]};
    const Pair gamma(uniform(channel, rng, 0.5f, 1.5f)), beta(uniform(channel, rng, -0.5f, 0.5f));
    const Pair dgamma(Tensor::zeros(channel)), dbeta(Tensor::zeros(channel));
    const Pair mean(Tensor::zeros(channel)), var(uniform(channel, rng, 0.5f, 1.5f));
    cpu.bind({gamma.host, beta.host}, {dgamma.host, dbeta.host});
    gpu.bind({gamma.device, beta.device}, {dgamma.device, dbeta.device});
    cpu.bindBuffers({mean.host, var.host});
    gpu.bindBuffers({mean.device, var.device});

    const Shape half = k.sample.withBatch(k.batch), whole = k.sample.withBatch(2 * k.batch);
    const Tensor x = randomHost(half, rng, 2.0f), g = randomHost(half, rng);
    Tensor x2 = Tensor::empty(whole), g2 = Tensor::empty(whole);
    for (int64_t part : {0, 1}) {
      x2.narrow(part * k.batch, k.batch).copyFrom(x);
      g2.narrow(part * k.batch, k.batch).copyFrom(g);
    }
    Tensor y2 = Tensor::empty(whole), dx2 = Tensor::empty(whole);
    cpu.forward({&x2}, y2, LayerContext{});
    cpu.backward({&x2}, y2, g2, {&dx2}, LayerContext{});

    DoublingReducer doubling(ctx);
    LayerContext lc;
    lc.stats_reducer = &doubling;
    const Tensor x_gpu = x.to(gpuDevice()), g_gpu = g.to(gpuDevice());
    Tensor y_gpu = Tensor::empty(half, gpuDevice()), dx_gpu = Tensor::empty(half, gpuDevice());
    gpu.forward({&x_gpu}, y_gpu, lc);
    gpu.backward({&x_gpu}, y_gpu, g_gpu, {&dx_gpu}, lc);

    CHECK(relativeError(y_gpu, y2.narrow(0, k.batch)) < 1e-4);
    CHECK(relativeError(dx_gpu, dx2.narrow(0, k.batch)) < 1e-4);
    CHECK(relativeError(mean.device, mean.host) < 2e-5);
    CHECK(relativeError(var.device, var.host) < 2e-5);  // unbiased with the summed count
    Tensor twice = dgamma.device.to(Device::cpu());
    twice.add(twice);
    CHECK(relativeError(twice, dgamma.host) < 1e-4);
    twice = dbeta.device.to(Device::cpu());
    twice.add(twice);
    CHECK(relativeError(twice, dbeta.host) < 1e-4);
  }
}

TEST_CASE("cuda: batch_norm names the path it chose, records it in the algorithm cache, and reuses it") {
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  AlgorithmCache cache;  // in memory
  cache.open(AlgorithmSource{"a test GPU", 1, 1});
  GpuLayerOptions options;
  options.algorithms = &cache;
  const Shape sample{16, 8, 8}, channel{16};
  const int64_t batch = 6;
  std::mt19937 rng(7);
  const Tensor x = randomHost(sample.withBatch(batch), rng, 2.0f).to(gpuDevice());
  const Tensor g = randomHost(sample.withBatch(batch), rng).to(gpuDevice());
  // One training step of a fresh layer sharing `cache`; returns its algorithmName.
  auto step = [&] {
    BatchNorm cpu("bn", BatchNormConfig{});
    CudaBatchNorm gpu(cpu, ctx, options);
    REQUIRE(gpu.setup({sample}) == sample);
    REQUIRE(gpu.fuseActivation("relu"));
    auto filled = [&](float value) {
      Tensor t = Tensor::empty(channel);
      for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = value;
      return t.to(gpuDevice());
    };
    gpu.bind({filled(1.0f), filled(0.0f)}, {filled(0.0f), filled(0.0f)});
    gpu.bindBuffers({filled(0.0f), filled(1.0f)});
    CHECK(gpu.algorithmName(batch).empty());  // nothing chosen before the first pass
    Tensor y = Tensor::empty(sample.withBatch(batch), gpuDevice());
    Tensor dx = Tensor::empty(sample.withBatch(batch), gpuDevice());
    gpu.forward({&x}, y, LayerContext{});
    gpu.backward({&x}, y, g, {&dx}, LayerContext{});
    CHECK(gpu.algorithmName(batch + 1).empty());  // another batch size: not chosen yet
    return gpu.algorithmName(batch);
  };
  auto firstWord = [](const std::string& s) { return s.substr(0, s.find(' ')); };

  const std::string timed = step();
  INFO("timed: " << timed);
  CHECK((firstWord(timed) == "cudnn" || firstWord(timed) == "own"));
  CHECK(timed.find("cached") == std::string::npos);
  BatchNormAlgorithmKey key;
  key.batch = batch;
  key.channels = 16;
  key.plane = 64;
  key.activation = "relu";
  const std::optional<AlgorithmChoice> recorded = cache.find(algorithmKey(key));
  REQUIRE(recorded.has_value());
  CHECK(batchNormPathName(static_cast<BatchNormPath>(recorded->algo)) == firstWord(timed));
  CHECK(recorded->time_ms > 0.0);

  const std::string cached = step();
  INFO("cached: " << cached);
  CHECK(firstWord(cached) == firstWord(timed));
  CHECK(cached.find("cached") != std::string::npos);
}

TEST_CASE("cuda: the GPU layer registry makes a CUDA batch_norm") {
  CudaContext& ctx = CudaContext::of(0);
  LayerOptions options("bn", "batch_norm", SourcePos{"job.toml", 3, 1});
  std::unique_ptr<Layer> layer = cudaLayers(ctx).create("batch_norm", "bn", options, LayerDefaults{});
  CHECK(layer->type() == "batch_norm");
  CHECK(dynamic_cast<CudaBatchNorm*>(layer.get()) != nullptr);
}
