#include "core/backend/cuda/cudnn_conv.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace dtrain {

namespace {

template <typename Algo>
struct AlgoChoice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t bytes = 0;
  bool deterministic = true;
};

const char* algoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "UNKNOWN";
  }
}

const char* algoName(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "UNKNOWN";
  }
}

const char* algoName(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "UNKNOWN";
  }
}

template <typename Algo>
std::string choiceText(const AlgoChoice<Algo>& c) {
  std::string text = algoName(c.algo);
  if (c.math != CUDNN_FMA_MATH) text += " (TF32 allowed)";
  if (!c.deterministic) text += " (non-deterministic)";
  return text;
}

// Full fp32 accepts only FMA kernels (cuDNN's default math lets Ampere and
// later use TF32); with TF32 allowed anything but conversion to half precision.
bool mathAccepted(cudnnMathType_t math, bool allow_tf32) {
  return allow_tf32 ? math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : math == CUDNN_FMA_MATH;
}

// The first of cuDNN's ranked candidates that it can run, with an accepted
// math type and a workspace within the limit; deterministic ones first.
// workspace_of(algo, math, bytes) asks cuDNN for the workspace of that pair
// (false when cuDNN cannot tell, which rules the pair out).
template <typename Perf, typename Algo, typename WorkspaceOf>
bool chooseAlgorithm(const std::vector<Perf>& ranked, bool allow_tf32, size_t limit, WorkspaceOf workspace_of,
                     AlgoChoice<Algo>& out) {
  for (bool deterministic_pass : {true, false})
    for (const Perf& p : ranked) {
      const bool deterministic = p.determinism == CUDNN_DETERMINISTIC;
      if (p.status != CUDNN_STATUS_SUCCESS || deterministic != deterministic_pass ||
          !mathAccepted(p.mathType, allow_tf32))
        continue;
      size_t bytes = 0;
      if (!workspace_of(p.algo, p.mathType, bytes) || bytes > limit) continue;
      out = AlgoChoice<Algo>{p.algo, p.mathType, bytes, deterministic};
      return true;
    }
  return false;
}

const ops::Window2d& validated(const ops::Window2d& g, int64_t filters, int64_t groups) {
  if (groups < 1 || g.channels % groups != 0 || filters % groups != 0)
    throw ShapeError("cuDNN convolution: " + std::to_string(groups) + " groups must divide the " +
                     std::to_string(g.channels) + " input channels and the " + std::to_string(filters) +
                     " filters");
  const bool ok = g.channels > 0 && g.height > 0 && g.width > 0 && g.kernel_h > 0 && g.kernel_w > 0 &&
                  g.stride_h > 0 && g.stride_w > 0 && g.pad_h >= 0 && g.pad_w >= 0 && filters > 0 &&
                  g.height + 2 * g.pad_h >= g.kernel_h && g.width + 2 * g.pad_w >= g.kernel_w;
  if (!ok)
    throw ShapeError("cuDNN convolution: " + std::to_string(filters) + " filters of " +
                     std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " (stride " +
                     std::to_string(g.stride_h) + "x" + std::to_string(g.stride_w) + ", padding " +
                     std::to_string(g.pad_h) + "x" + std::to_string(g.pad_w) + ") do not fit an input of " +
                     std::to_string(g.channels) + "x" + std::to_string(g.height) + "x" +
                     std::to_string(g.width));
  return g;
}

std::string describeConv(const ops::Window2d& g, int64_t filters, int64_t groups) {
  auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); };
  return "conv " + std::to_string(g.channels) + "x" + pair(g.height, g.width) + " -> " +
         std::to_string(filters) + "x" + pair(g.outHeight(), g.outWidth()) + ", kernel " +
         pair(g.kernel_h, g.kernel_w) + ", stride " + pair(g.stride_h, g.stride_w) + ", padding " +
         pair(g.pad_h, g.pad_w) + (groups > 1 ? ", " + std::to_string(groups) + " groups" : "");
}

}  // namespace

struct CudnnConv::Plan {
  Plan(CudnnTensorDescriptor x_desc, CudnnTensorDescriptor y_desc)
      : x(std::move(x_desc)), y(std::move(y_desc)) {}
  size_t workspace() const { return std::max({fwd.bytes, data.bytes, filter.bytes}); }

  CudnnTensorDescriptor x, y;  // [n,C,H,W] and [n,F,Ho,Wo]
  AlgoChoice<cudnnConvolutionFwdAlgo_t> fwd;
  AlgoChoice<cudnnConvolutionBwdDataAlgo_t> data;
  AlgoChoice<cudnnConvolutionBwdFilterAlgo_t> filter;
};

// geom_ is initialised first (declaration order), so the groups are checked
// before the filter descriptor divides by them.
CudnnConv::CudnnConv(const ops::Window2d& geom, int64_t filters, bool allow_tf32,
                     size_t workspace_limit_bytes, int64_t groups)
    : geom_(validated(geom, filters, groups)),
      filters_(filters),
      allow_tf32_(allow_tf32),
      workspace_limit_(workspace_limit_bytes),
      describe_(describeConv(geom, filters, groups)),
      filter_(filters, geom.channels / groups, geom.kernel_h, geom.kernel_w),
      conv_(geom.pad_h, geom.pad_w, geom.stride_h, geom.stride_w,
            allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH, groups) {}

CudnnConv::~CudnnConv() = default;

void CudnnConv::check(cudnnStatus_t status, const char* what, int64_t n) const {
  if (status == CUDNN_STATUS_SUCCESS) return;
  checkCudnn(status, (std::string(what) + " for " + describe_ + ", batch " + std::to_string(n)).c_str());
}

CudnnConv::Plan& CudnnConv::planFor(cudnnHandle_t handle, int64_t n) {
  if (n < 1)
    throw ShapeError("cuDNN: " + describe_ + ": batch size " + std::to_string(n) + " must be at least 1");
  auto found = plans_.find(n);
  if (found != plans_.end()) return *found->second;

  std::unique_ptr<Plan> plan;
  try {
    plan = std::make_unique<Plan>(CudnnTensorDescriptor(n, geom_.channels, geom_.height, geom_.width),
                                  CudnnTensorDescriptor(n, filters_, geom_.outHeight(), geom_.outWidth()));
  } catch (const DeviceError& e) {  // a batch too large for cuDNN's int indexing: say whose
    throw DeviceError(std::string(e.what()) + " (" + describe_ + ", batch " + std::to_string(n) + ")");
  }
  // cuDNN must see the output shape the layer allocates.
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(cudnnGetConvolution2dForwardOutputDim(conv_.get(), plan->x.get(), filter_.get(), &on, &oc, &oh, &ow),
        "ask the output shape", n);
  if (on != n || oc != filters_ || oh != geom_.outHeight() || ow != geom_.outWidth())
    throw DeviceError("cuDNN: " + describe_ + ": cuDNN computes an output of " + std::to_string(oc) + "x" +
                      std::to_string(oh) + "x" + std::to_string(ow) + " for batch " + std::to_string(n));

  auto none = [&](const char* pass) {
    return DeviceError("cuDNN: no " + std::string(pass) + " algorithm for " + describe_ + ", batch " +
                       std::to_string(n) + (allow_tf32_ ? "" : " in full fp32 (FMA) math") +
                       " fits the workspace limit of " + std::to_string(workspace_limit_) +
                       " bytes; raise the limit");
  };
  int count = 0;

  check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count), "count forward algorithms", n);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(std::max(count, 1)));
  check(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x.get(), filter_.get(), conv_.get(),
                                               plan->y.get(), count, &count, fwd.data()),
        "rank forward algorithms", n);
  fwd.resize(static_cast<size_t>(count));
  auto fwd_bytes = [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math, size_t& bytes) {
    conv_.setMathType(math);
    return cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x.get(), filter_.get(), conv_.get(),
                                                   plan->y.get(), algo, &bytes) == CUDNN_STATUS_SUCCESS;
  };
  if (!chooseAlgorithm(fwd, allow_tf32_, workspace_limit_, fwd_bytes, plan->fwd)) throw none("forward");

  check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count), "count backward-data algorithms",
        n);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(static_cast<size_t>(std::max(count, 1)));
  check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, filter_.get(), plan->y.get(), conv_.get(),
                                                    plan->x.get(), count, &count, data.data()),
        "rank backward-data algorithms", n);
  data.resize(static_cast<size_t>(count));
  auto data_bytes = [&](cudnnConvolutionBwdDataAlgo_t algo, cudnnMathType_t math, size_t& bytes) {
    conv_.setMathType(math);
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, filter_.get(), plan->y.get(), conv_.get(),
                                                        plan->x.get(), algo, &bytes) == CUDNN_STATUS_SUCCESS;
  };
  if (!chooseAlgorithm(data, allow_tf32_, workspace_limit_, data_bytes, plan->data))
    throw none("backward-data");

  check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count),
        "count backward-filter algorithms", n);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(static_cast<size_t>(std::max(count, 1)));
  check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x.get(), plan->y.get(), conv_.get(),
                                                      filter_.get(), count, &count, filter.data()),
        "rank backward-filter algorithms", n);
  filter.resize(static_cast<size_t>(count));
  auto filter_bytes = [&](cudnnConvolutionBwdFilterAlgo_t algo, cudnnMathType_t math, size_t& bytes) {
    conv_.setMathType(math);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan->x.get(), plan->y.get(), conv_.get(),
                                                          filter_.get(), algo,
                                                          &bytes) == CUDNN_STATUS_SUCCESS;
  };
  if (!chooseAlgorithm(filter, allow_tf32_, workspace_limit_, filter_bytes, plan->filter))
    throw none("backward-filter");

  ++searches_;
  return *plans_.emplace(n, std::move(plan)).first->second;
}

CudnnConv::Plan& CudnnConv::checkedPlan(cudnnHandle_t handle, int64_t n, size_t workspace_bytes,
                                        const char* pass) {
  Plan& plan = planFor(handle, n);
  if (workspace_bytes < plan.workspace())
    throw DeviceError("cuDNN: " + std::string(pass) + " for " + describe_ + ", batch " + std::to_string(n) +
                      ": a workspace of " + std::to_string(workspace_bytes) + " bytes is smaller than the " +
                      std::to_string(plan.workspace()) + " bytes workspaceBytes(" + std::to_string(n) +
                      ") asked for");
  return plan;
}

size_t CudnnConv::workspaceBytes(cudnnHandle_t handle, int64_t n) {
  if (n == 0) return 0;
  return planFor(handle, n).workspace();
}

void CudnnConv::forward(cudnnHandle_t handle, const float* x, const float* w, float* y, int64_t n,
                        void* workspace, size_t workspace_bytes) {
  if (n == 0) return;
  Plan& plan = checkedPlan(handle, n, workspace_bytes, "convolution forward");
  const float one = 1.0f, zero = 0.0f;
  conv_.setMathType(plan.fwd.math);
  check(cudnnConvolutionForward(handle, &one, plan.x.get(), x, filter_.get(), w, conv_.get(), plan.fwd.algo,
                                workspace, workspace_bytes, &zero, plan.y.get(), y),
        "convolution forward", n);
}

void CudnnConv::backwardData(cudnnHandle_t handle, const float* w, const float* dy, float* dx, int64_t n,
                             void* workspace, size_t workspace_bytes) {
  if (n == 0) return;
  Plan& plan = checkedPlan(handle, n, workspace_bytes, "convolution backward-data");
  const float one = 1.0f, zero = 0.0f;
  conv_.setMathType(plan.data.math);
  check(cudnnConvolutionBackwardData(handle, &one, filter_.get(), w, plan.y.get(), dy, conv_.get(),
                                     plan.data.algo, workspace, workspace_bytes, &zero, plan.x.get(), dx),
        "convolution backward-data", n);
}

void CudnnConv::backwardFilter(cudnnHandle_t handle, const float* x, const float* dy, float* dw, int64_t n,
                               void* workspace, size_t workspace_bytes) {
  if (n == 0) return;
  Plan& plan = checkedPlan(handle, n, workspace_bytes, "convolution backward-filter");
  const float one = 1.0f;  // beta = 1: the gradient accumulates into dw
  conv_.setMathType(plan.filter.math);
  check(cudnnConvolutionBackwardFilter(handle, &one, plan.x.get(), x, plan.y.get(), dy, conv_.get(),
                                       plan.filter.algo, workspace, workspace_bytes, &one, filter_.get(), dw),
        "convolution backward-filter", n);
}

std::string CudnnConv::algorithms(int64_t n) const {
  auto found = plans_.find(n);
  if (found == plans_.end()) return "no algorithms chosen yet for batch " + std::to_string(n);
  const Plan& p = *found->second;
  return "fwd " + choiceText(p.fwd) + ", bwd-data " + choiceText(p.data) + ", bwd-filter " +
         choiceText(p.filter);
}

}  // namespace dtrain
