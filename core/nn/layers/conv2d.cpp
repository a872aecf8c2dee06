#include "core/nn/layers/conv2d.h"

#include <algorithm>

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// Winograd pays off once the per-transform-element gemms have some depth: with
// few input channels the transforms cost more than the multiplies they save.
constexpr int64_t kWinogradMinChannels = 4;
// The Winograd transforms run 8 tiles of a tile row per vector. Below 4 tiles
// per row (an output narrower than 13), F(4x4,3x3) moves mostly empty lanes
// and F(2x2,3x3), with twice the tiles per row, is faster (measured on
// ResNet-20's layers: F(4x4,3x3) 20% faster at 32x32, 7% at 16x16, 20%
// slower at 8x8).
constexpr int64_t kWinograd4x4MinWidth = 13;
// Products with a short inner dimension (a first layer's im2col, Winograd's
// per-element products) whose weights fit L1 run faster unpacked (see
// ops::gemmUnpacked) than through OpenBLAS, which packs on every call.
constexpr int64_t kUnpackedMaxInner = 128;
constexpr int64_t kUnpackedMaxWeights = 8192;
// ops::weightGradRows streams each row of dY once against up to 10 rows of
// col held in L1; with more, it re-reads dY and col from L2 and runs at half
// gemm's speed (measured at 16 to 96 inputs per filter).
constexpr int64_t kRowsWeightGradMaxInner = 10;
// Per sample, a 1x1 product over a plane this small (MobileNetV2's 6x6 and
// 3x3 stages) spends more in OpenBLAS's packing than in multiplying; the
// pointwise algorithm lays the batch's planes side by side instead. At 12x12
// and above the copies cost what they save (measured on MobileNetV2 at 96x96).
constexpr int64_t kPointwiseMaxPlane = 64;

}  // namespace

Conv2d::Conv2d(std::string name, Conv2dConfig config) : Layer(std::move(name)), config_(config) {
  const Conv2dConfig& c = config_;
  const bool depthwise = c.depth_multiplier > 0;  // filters and groups follow the input
  if ((!depthwise && (c.filters <= 0 || c.groups <= 0)) || c.depth_multiplier < 0 || c.kernel_h <= 0 ||
      c.kernel_w <= 0 || c.stride_h <= 0 || c.stride_w <= 0 || c.pad_h < 0 || c.pad_w < 0)
    throw ConfigError(layer_util::label(*this) +
                      ": filters, groups, kernel and stride must be > 0 and padding >= 0");
  if (!depthwise && c.filters % c.groups != 0)
    throw ConfigError(layer_util::label(*this) + ": filters " + std::to_string(c.filters) +
                      " are not divisible by groups " + std::to_string(c.groups));
}

std::unique_ptr<Layer> Conv2d::create(const std::string& name, const LayerOptions& options,
                                      const LayerDefaults& defaults) {
  Conv2dConfig c;
  c.filters = options.getInt("filters");
  if (c.filters <= 0) options.fail("filters", "filters must be > 0 (got " + std::to_string(c.filters) + ")");
  std::tie(c.kernel_h, c.kernel_w) = layer_util::readPositivePair(options, "kernel", {3, 3});
  std::tie(c.stride_h, c.stride_w) = layer_util::readPositivePair(options, "stride", {1, 1});
  std::tie(c.pad_h, c.pad_w) = layer_util::readPositivePair(options, "padding", {0, 0}, true);
  c.groups = options.getInt("groups", 1);
  if (c.groups <= 0) options.fail("groups", "groups must be > 0 (got " + std::to_string(c.groups) + ")");
  // The input channels are known only in setup(), which checks them the same way.
  if (c.filters % c.groups != 0)
    options.fail("groups", "filters " + std::to_string(c.filters) + " are not divisible by groups " +
                               std::to_string(c.groups) +
                               "; groups must divide the filters and the input channels");
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
  if (c.depth_multiplier > 0) {
    config_.groups = s[0];
    config_.filters = s[0] * c.depth_multiplier;
  }
  if (s[0] % c.groups != 0)
    throw ShapeError(layer_util::label(*this) + ": input channels " + std::to_string(s[0]) +
                     " are not divisible by groups " + std::to_string(c.groups) +
                     "; groups must divide the filters and the input channels");
  if (s[1] + 2 * c.pad_h < c.kernel_h || s[2] + 2 * c.pad_w < c.kernel_w)
    throw ShapeError(layer_util::label(*this) + ": kernel " + layer_util::pairText(c.kernel_h, c.kernel_w) +
                     " with padding " + layer_util::pairText(c.pad_h, c.pad_w, true) +
                     " does not fit input " + s.str());
  geom_ = ops::Window2d{s[0], s[1], s[2], c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.pad_h, c.pad_w};
  pointwise_ = c.kernel_h == 1 && c.kernel_w == 1 && c.stride_h == 1 && c.stride_w == 1 && c.pad_h == 0 &&
               c.pad_w == 0;
  const bool winograd_ok = c.groups == 1 && ops::winogradSupported(geom_);
  const bool depthwise_ok = c.groups == geom_.channels;  // then filters = C * (filters / C)
  const bool pointwise_ok = c.groups == 1 && pointwise_;
  // A pinned algorithm (tests, benchmarks) that cannot compute this layer is an error.
  auto pin = [&](bool ok, ConvAlgo algo, const std::string& needs) {
    if (!ok) throw ShapeError(layer_util::label(*this) + ": the " + needs);
    algo_ = algo;
  };
  switch (c.algo) {
    case ConvAlgo::Auto:
      if (c.groups > 1)
        algo_ = depthwise_ok ? ConvAlgo::Depthwise : ConvAlgo::Im2col;
      else if (winograd_ok && geom_.channels >= kWinogradMinChannels)
        algo_ = geom_.outHeight() >= 4 && geom_.outWidth() >= kWinograd4x4MinWidth ? ConvAlgo::Winograd4x4
                                                                                   : ConvAlgo::Winograd2x2;
      else
        algo_ =
            pointwise_ok && geom_.outPlane() <= kPointwiseMaxPlane ? ConvAlgo::Pointwise : ConvAlgo::Im2col;
      break;
    case ConvAlgo::Pointwise:
      pin(pointwise_ok, ConvAlgo::Pointwise,
          "pointwise algorithm needs groups 1 and a 1x1 stride-1 kernel without padding");
      break;
    case ConvAlgo::Winograd2x2:
    case ConvAlgo::Winograd4x4:
      pin(winograd_ok, c.algo,
          "Winograd algorithm needs groups 1 and a 3x3 stride-1 kernel with padding <= 2");
      break;
    case ConvAlgo::Depthwise:
      pin(depthwise_ok, ConvAlgo::Depthwise,
          "depthwise algorithm needs groups = input channels (" + std::to_string(c.groups) + " groups, " +
              std::to_string(geom_.channels) + " channels)");
      break;
    case ConvAlgo::Im2col:
      algo_ = ConvAlgo::Im2col;
      break;
  }
  // The products' inner dimension: im2col's C/groups*kh*kw, Winograd's C
  // (forward) and filters (input gradient); their small operand: the
  // (transformed) weights of one group.
  const int64_t group_channels = geom_.channels / c.groups, group_filters = c.filters / c.groups;
  winograd_ = algo_ == ConvAlgo::Winograd2x2   ? &ops::winograd2x2()
              : algo_ == ConvAlgo::Winograd4x4 ? &ops::winograd4x4()
                                               : nullptr;
  const int64_t inner =
      winograd_ ? std::max(geom_.channels, c.filters) : group_channels * c.kernel_h * c.kernel_w;
  const int64_t weights = group_filters * (winograd_ ? geom_.channels : inner);
  unpacked_ = inner <= kUnpackedMaxInner && weights <= kUnpackedMaxWeights;
  rows_weight_grad_ = unpacked_ && !winograd_ && inner <= kRowsWeightGradMaxInner;
  return Shape{c.filters, geom_.outHeight(), geom_.outWidth()};
}

std::vector<ParamSpec> Conv2d::paramSpecs() const {
  const Conv2dConfig& c = config_;
  const int64_t area = c.kernel_h * c.kernel_w, group_channels = geom_.channels / c.groups;
  // Each output reads C/groups channels; each input feeds filters/groups filters.
  const int64_t fan_in = group_channels * area, fan_out = c.filters / c.groups * area;
  std::vector<ParamSpec> specs{
      {"weight", Shape{c.filters, group_channels, c.kernel_h, c.kernel_w}, c.init, fan_in, fan_out}};
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

Conv2d::Buffers& Conv2d::scratch() {
  thread_local Buffers buffers;
  return buffers;
}

bool Conv2d::fuseActivation(const std::string& type) {
  if (type != "relu" || relu_) return false;
  relu_ = true;
  return true;
}

void Conv2d::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  if (winograd_)
    forwardWinograd(in[0]->data(), n, out.data());
  else if (algo_ == ConvAlgo::Depthwise)
    forwardDepthwise(in[0]->data(), n, out.data());
  else if (algo_ == ConvAlgo::Pointwise)
    forwardPointwise(in[0]->data(), n, out.data());
  else if (config_.groups > 1)
    forwardGrouped(in[0]->data(), n, out.data());
  else
    forwardIm2col(in[0]->data(), n, out.data());
}

void Conv2d::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                      const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  // BackwardPart::Params comes with every din null: the parameter gradients alone.
  float* dx = din[0] ? din[0]->data() : nullptr;
  const bool param_grads = ctx.backward_part != BackwardPart::Inputs;
  if (!param_grads && !dx) return;
  if (winograd_)
    backwardWinograd(in[0]->data(), out.data(), dout.data(), n, dx, param_grads);
  else if (algo_ == ConvAlgo::Depthwise)
    backwardDepthwise(in[0]->data(), out.data(), dout.data(), n, dx);
  else if (algo_ == ConvAlgo::Pointwise)
    backwardPointwise(in[0]->data(), out.data(), dout.data(), n, dx, param_grads);
  else if (config_.groups > 1)
    backwardGrouped(in[0]->data(), out.data(), dout.data(), n, dx, param_grads);
  else
    backwardIm2col(in[0]->data(), out.data(), dout.data(), n, dx, param_grads);
}

int64_t Conv2d::forwardFlops() const {
  const int64_t outputs = config_.filters * geom_.outPlane();
  return 2 * outputs * (geom_.channels / config_.groups) * geom_.kernel_h * geom_.kernel_w +
         (config_.bias ? outputs : 0) + (relu_ ? outputs : 0);
}

std::string Conv2d::describe() const {
  const Conv2dConfig& c = config_;
  std::string s = layer_util::pairText(c.kernel_h, c.kernel_w) + " s" +
                  layer_util::pairText(c.stride_h, c.stride_w, true) + " p" +
                  layer_util::pairText(c.pad_h, c.pad_w, true) + ", ";
  if (c.depth_multiplier > 0)
    s += "depth multiplier " + std::to_string(c.depth_multiplier);
  else
    s += std::to_string(c.filters) + " filters" +
         (c.groups > 1 ? ", " + std::to_string(c.groups) + " groups" : "");
  if (!c.bias) s += ", no bias";
  if (relu_) s += ", relu fused";
  return s;
}

std::string Conv2d::algorithmName(int64_t) const {
  switch (algo_) {
    case ConvAlgo::Im2col:
      return "im2col";
    case ConvAlgo::Winograd2x2:
      return "winograd2x2";
    case ConvAlgo::Winograd4x4:
      return "winograd4x4";
    case ConvAlgo::Depthwise:
      return "depthwise";
    case ConvAlgo::Pointwise:
      return "pointwise";
    case ConvAlgo::Auto:
      break;
  }
  return "";
}

}  // namespace dtrain
