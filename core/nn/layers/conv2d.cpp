#include "core/nn/layers/conv2d.h"

#include <algorithm>

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// Winograd pays off once the per-transform-element gemms have some depth: with
// few input channels the transforms cost more than the multiplies they save.
constexpr int64_t kWinogradMinChannels = 4;
// Tiles per Winograd chunk: large enough for efficient gemms, small enough that
// the transformed input and the products of a chunk stay in L2.
constexpr int64_t kWinogradChunkTiles = 64;

int64_t roundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace

Conv2d::Conv2d(std::string name, Conv2dConfig config) : Layer(std::move(name)), config_(config) {
  const Conv2dConfig& c = config_;
  if (c.filters <= 0 || c.kernel_h <= 0 || c.kernel_w <= 0 || c.stride_h <= 0 || c.stride_w <= 0 || c.pad_h < 0 ||
      c.pad_w < 0)
    throw ConfigError(layer_util::label(*this) + ": filters, kernel and stride must be > 0 and padding >= 0");
}

std::unique_ptr<Layer> Conv2d::create(const std::string& name, const LayerOptions& options,
                                      const LayerDefaults& defaults) {
  Conv2dConfig c;
  c.filters = options.getInt("filters");
  if (c.filters <= 0) options.fail("filters", "filters must be > 0 (got " + std::to_string(c.filters) + ")");
  std::tie(c.kernel_h, c.kernel_w) = layer_util::readPositivePair(options, "kernel", {3, 3});
  std::tie(c.stride_h, c.stride_w) = layer_util::readPositivePair(options, "stride", {1, 1});
  std::tie(c.pad_h, c.pad_w) = layer_util::readPositivePair(options, "padding", {0, 0}, true);
  c.bias = options.getBool("bias", true);
  c.init = layer_util::readInit(options, defaults);
  options.finish();
  return std::make_unique<Conv2d>(name, c);
}

Shape Conv2d::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 3)
    throw ShapeError(layer_util::label(*this) + " expects an input [channels,height,width], got " + s.str());
  const Conv2dConfig& c = config_;
  if (s[1] + 2 * c.pad_h < c.kernel_h || s[2] + 2 * c.pad_w < c.kernel_w)
    throw ShapeError(layer_util::label(*this) + ": kernel " + layer_util::pairText(c.kernel_h, c.kernel_w) +
                     " with padding " + layer_util::pairText(c.pad_h, c.pad_w, true) + " does not fit input " +
                     s.str());
  geom_ = ops::Window2d{s[0], s[1], s[2], c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.pad_h, c.pad_w};
  pointwise_ = c.kernel_h == 1 && c.kernel_w == 1 && c.stride_h == 1 && c.stride_w == 1 && c.pad_h == 0 &&
               c.pad_w == 0;
  const bool winograd_ok = ops::winogradSupported(geom_);
  switch (c.algo) {
    case ConvAlgo::Auto:
      algo_ = winograd_ok && geom_.channels >= kWinogradMinChannels ? ConvAlgo::Winograd : ConvAlgo::Im2col;
      break;
    case ConvAlgo::Winograd:
      if (!winograd_ok)
        throw ShapeError(layer_util::label(*this) + ": the Winograd algorithm needs a 3x3 stride-1 kernel");
      algo_ = ConvAlgo::Winograd;
      break;
    case ConvAlgo::Im2col:
      algo_ = ConvAlgo::Im2col;
      break;
  }
  return Shape{c.filters, geom_.outHeight(), geom_.outWidth()};
}

std::vector<ParamSpec> Conv2d::paramSpecs() const {
  const Conv2dConfig& c = config_;
  const int64_t area = c.kernel_h * c.kernel_w;
  const int64_t fan_in = geom_.channels * area, fan_out = c.filters * area;
  std::vector<ParamSpec> specs{
      {"weight", Shape{c.filters, geom_.channels, c.kernel_h, c.kernel_w}, c.init, fan_in, fan_out}};
  if (c.bias) specs.push_back({"bias", Shape{c.filters}, InitKind::Zeros, fan_in, fan_out});
  return specs;
}

void Conv2d::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  weight_ = params.at(0);
  dweight_ = grads.at(0);
  if (config_.bias) {
    bias_ = params.at(1);
    dbias_ = grads.at(1);
  }
}

bool Conv2d::fuseActivation(const std::string& type) {
  if (type != "relu" || relu_) return false;
  relu_ = true;
  return true;
}

void Conv2d::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  if (algo_ == ConvAlgo::Winograd)
    forwardWinograd(in[0]->data(), n, out.data());
  else
    forwardIm2col(in[0]->data(), n, out.data());
}

void Conv2d::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                      const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  float* dx = din[0] ? din[0]->data() : nullptr;
  if (algo_ == ConvAlgo::Winograd)
    backwardWinograd(in[0]->data(), out.data(), dout.data(), n, dx);
  else
    backwardIm2col(in[0]->data(), out.data(), dout.data(), n, dx);
}

// ------------------------------------------------------------------ im2col --

// Per sample, so the col matrix (C*kh*kw x Ho*Wo) stays in cache between
// im2col and the gemm, and the output plane is still cached for the bias pass.
void Conv2d::forwardIm2col(const float* x, int64_t n, float* y) {
  const int64_t f = config_.filters, k = geom_.channels * geom_.kernel_h * geom_.kernel_w;
  const int64_t p = geom_.outPlane(), in_size = geom_.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : col_.floats(k * p);
  for (int64_t s = 0; s < n; ++s) {
    const float* xs = x + s * in_size;
    float* ys = y + s * f * p;
    if (!pointwise_) ops::im2col(xs, geom_, col);
    ops::gemm(false, false, f, p, k, 1.0f, weight_.data(), k, pointwise_ ? xs : col, p, 0.0f, ys, p);
    if (config_.bias || relu_) ops::biasActPlanes(ys, config_.bias ? bias_.data() : nullptr, f, p, relu_);
  }
}

void Conv2d::backwardIm2col(const float* x, const float* y, const float* dy, int64_t n, float* dx) {
  const int64_t f = config_.filters, k = geom_.channels * geom_.kernel_h * geom_.kernel_w;
  const int64_t p = geom_.outPlane(), in_size = geom_.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : col_.floats(k * p);
  float* masked = relu_ ? masked_.floats(f * p) : nullptr;
  for (int64_t s = 0; s < n; ++s) {
    const float* xs = x + s * in_size;
    const float* dys = dy + s * f * p;
    if (relu_) {
      ops::reluBackward(y + s * f * p, dys, masked, f * p);
      dys = masked;
    }
    // dW += dY col^T (col recomputed: cheaper than keeping a batch of them).
    if (!pointwise_) ops::im2col(xs, geom_, col);
    ops::gemm(false, true, f, k, p, 1.0f, dys, p, pointwise_ ? xs : col, p, 1.0f, dweight_.data(), k);
    if (config_.bias) ops::biasGradPlanes(dys, f, p, dbias_.data());
    if (!dx) continue;  // the network input needs no gradient: skip a third of the work
    float* dxs = dx + s * in_size;
    // dcol = W^T dY, then col2im; a pointwise kernel's dcol is dx itself.
    ops::gemm(true, false, k, p, f, 1.0f, weight_.data(), k, dys, p, 0.0f, pointwise_ ? dxs : col, p);
    if (!pointwise_) ops::col2im(col, geom_, dxs);
  }
}

// ---------------------------------------------------------------- winograd --

int64_t Conv2d::winogradChunk() const {
  return std::max<int64_t>(1, kWinogradChunkTiles / ops::winogradTiles(geom_).perSample());
}

void Conv2d::forwardWinograd(const float* x, int64_t n, float* y) {
  const int64_t f = config_.filters, c = geom_.channels, t = ops::winogradTiles(geom_).perSample();
  const int64_t chunk = winogradChunk(), ld = roundUp(chunk * t, 8);
  const int64_t vplane = ops::winogradPlaneStride(c, ld), mplane = ops::winogradPlaneStride(f, ld);
  float* u = u_.floats(16 * f * c);
  float* v = v_.floats(16 * vplane);
  float* m = m_.floats(16 * mplane);
  ops::winogradFilterTransform(weight_.data(), f, c, u);
  const int64_t in_size = c * geom_.inPlane(), out_size = f * geom_.outPlane();
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t nb = std::min(chunk, n - s0), cols = nb * t;
    ops::winogradInputTransform(x + s0 * in_size, nb, geom_, v, ld, vplane);
    for (int xi = 0; xi < 16; ++xi)
      ops::gemm(false, false, f, cols, c, 1.0f, u + xi * f * c, c, v + xi * vplane, ld, 0.0f, m + xi * mplane, ld);
    ops::winogradOutputTransform(m, ld, mplane, nb, f, geom_, config_.bias ? bias_.data() : nullptr, relu_,
                                 y + s0 * out_size);
  }
}

void Conv2d::backwardWinograd(const float* x, const float* y, const float* dy, int64_t n, float* dx) {
  const int64_t f = config_.filters, c = geom_.channels, t = ops::winogradTiles(geom_).perSample();
  const int64_t chunk = winogradChunk(), ld = roundUp(chunk * t, 8);
  const int64_t vplane = ops::winogradPlaneStride(c, ld), zplane = ops::winogradPlaneStride(f, ld);
  // u is recomputed rather than kept from forward: it is cheap, and backward
  // then does not depend on which forward ran last.
  float* u = dx ? u_.floats(16 * f * c) : nullptr;
  float* du = du_.floats(16 * f * c);
  float* v = v_.floats(16 * vplane);
  float* z = m_.floats(16 * zplane);
  if (dx) ops::winogradFilterTransform(weight_.data(), f, c, u);
  std::fill(du, du + 16 * f * c, 0.0f);
  const int64_t in_size = c * geom_.inPlane(), out_size = f * geom_.outPlane();
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t nb = std::min(chunk, n - s0), cols = nb * t;
    ops::winogradInputTransform(x + s0 * in_size, nb, geom_, v, ld, vplane);
    ops::winogradGradOutputTransform(dy + s0 * out_size, relu_ ? y + s0 * out_size : nullptr, nb, f, geom_, z, ld,
                                     zplane);
    for (int xi = 0; xi < 16; ++xi) {
      float* vx = v + xi * vplane;
      const float* zx = z + xi * zplane;
      // du_xi += z_xi v_xi^T; then v_xi is free and receives dv_xi = u_xi^T z_xi.
      ops::gemm(false, true, f, c, cols, 1.0f, zx, ld, vx, ld, 1.0f, du + xi * f * c, c);
      if (dx) ops::gemm(true, false, c, cols, f, 1.0f, u + xi * f * c, c, zx, ld, 0.0f, vx, ld);
    }
    if (dx) ops::winogradGradInputTransform(v, ld, vplane, nb, geom_, dx + s0 * in_size);
    // The bias gradient is the sum of each dY tile, which is z's element xi = 5
    // (the centre of A g A^T): no extra pass over dY.
    if (config_.bias)
      for (int64_t fi = 0; fi < f; ++fi) ops::biasGradPlanes(z + 5 * zplane + fi * ld, 1, cols, dbias_.data() + fi);
  }
  ops::winogradFilterGradTransform(du, f, c, dweight_.data());
}

// -------------------------------------------------------------- reporting --

int64_t Conv2d::forwardFlops() const {
  const int64_t outputs = config_.filters * geom_.outPlane();
  return 2 * outputs * geom_.channels * geom_.kernel_h * geom_.kernel_w + (config_.bias ? outputs : 0) +
         (relu_ ? outputs : 0);
}

std::string Conv2d::describe() const {
  const Conv2dConfig& c = config_;
  std::string s = layer_util::pairText(c.kernel_h, c.kernel_w) + " s" + layer_util::pairText(c.stride_h, c.stride_w, true) +
                  " p" + layer_util::pairText(c.pad_h, c.pad_w, true) + ", " + std::to_string(c.filters) + " filters";
  if (!c.bias) s += ", no bias";
  if (relu_) s += ", relu fused";
  if (algo_ == ConvAlgo::Winograd) s += ", winograd";
  return s;
}

}  // namespace dtrain
