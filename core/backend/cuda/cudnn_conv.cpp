#include "core/backend/cuda/cudnn_conv.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/median_time.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// cudnnFind runs each candidate once per call; the median of three calls
// keeps one disturbed run from deciding.
constexpr int kTrials = 3;
// Below this a search runs without a workspace rather than ask for less.
constexpr size_t kSmallestSearchWorkspace = size_t{1} << 20;

const char* algoName(ConvPass pass, int algo) {
  switch (pass) {
    case ConvPass::Forward:
      switch (static_cast<cudnnConvolutionFwdAlgo_t>(algo)) {
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
    case ConvPass::BackwardData:
      switch (static_cast<cudnnConvolutionBwdDataAlgo_t>(algo)) {
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
    case ConvPass::BackwardFilter:
      switch (static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo)) {
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
  return "UNKNOWN";
}

// One algorithm as cuDNN reports it, whichever pass: from the heuristics
// (time unset) or from a timed search.
struct Candidate {
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  bool ok = false;
  bool deterministic = false;
  float time_ms = 0;
  size_t memory = 0;
};

template <typename Perf>
std::vector<Candidate> candidates(const std::vector<Perf>& perf, int count) {
  std::vector<Candidate> out;
  for (int i = 0; i < count && i < static_cast<int>(perf.size()); ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    out.push_back(Candidate{static_cast<int>(p.algo), p.mathType, p.status == CUDNN_STATUS_SUCCESS,
                            p.determinism == CUDNN_DETERMINISTIC, p.time, p.memory});
  }
  return out;
}

// Whether tensor-core kernels are candidates: TF32 ones for fp32 data when
// allowed, and always for 16-bit data (which they multiply exactly, summing
// in fp32, as the FMA kernels do).
bool tensorOpsAllowed(const ConvAlgoOptions& o) { return o.allow_tf32 || o.dtype != DType::F32; }

// The math type a search or the heuristics ask with: cuDNN then also offers
// the algorithms without a tensor-core kernel, under their own math type.
cudnnMathType_t searchMath(const ConvAlgoOptions& o) {
  return tensorOpsAllowed(o) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

// Full fp32 accepts only FMA kernels (cuDNN's default math lets Ampere and
// later use TF32); with tensor cores allowed anything but conversion of the
// data to half precision (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which would
// round fp32 inputs to fp16; never asked for, so never expected).
bool mathAccepted(cudnnMathType_t math, bool tensor_ops) {
  return tensor_ops ? math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : math == CUDNN_FMA_MATH;
}

int passIndex(ConvPass pass) { return static_cast<int>(pass); }

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

struct CudnnConv::Choice {
  enum class How { Heuristic, Measured, Cached };
  bool chosen = false;
  bool searched = false;  // choose() ran: a failed search is not repeated every step
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t bytes = 0;
  bool deterministic = true;
  How how = How::Heuristic;
  double time_ms = 0;
};

struct CudnnConv::Plan {
  Plan(CudnnTensorDescriptor x_desc, CudnnTensorDescriptor y_desc)
      : x(std::move(x_desc)), y(std::move(y_desc)) {}
  Choice& of(ConvPass pass) { return passes[passIndex(pass)]; }

  CudnnTensorDescriptor x, y;  // [n,C,H,W] and [n,F,Ho,Wo]
  Choice passes[3];
};

// geom_ is initialised first (declaration order), so the groups are checked
// before the filter descriptor divides by them.
CudnnConv::CudnnConv(const ops::Window2d& geom, int64_t filters, const ConvAlgoOptions& options,
                     int64_t groups)
    : geom_(validated(geom, filters, groups)),
      filters_(filters),
      groups_(groups),
      options_(options),
      describe_(describeConv(geom, filters, groups)),
      filter_(filters, geom.channels / groups, geom.kernel_h, geom.kernel_w, cudnnDataTypeOf(options.dtype),
              options.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW),
      conv_(geom.pad_h, geom.pad_w, geom.stride_h, geom.stride_w, searchMath(options), groups) {}

CudnnConv::~CudnnConv() = default;

void CudnnConv::check(cudnnStatus_t status, const char* what, int64_t n) const {
  if (status == CUDNN_STATUS_SUCCESS) return;
  checkCudnn(status, (std::string(what) + " for " + describe_ + ", batch " + std::to_string(n)).c_str());
}

std::string CudnnConv::key(int64_t n, ConvPass pass) const {
  ConvAlgorithmKey k;
  k.pass = pass;
  k.batch = n;
  k.channels = geom_.channels;
  k.height = geom_.height;
  k.width = geom_.width;
  k.filters = filters_;
  k.kernel_h = geom_.kernel_h;
  k.kernel_w = geom_.kernel_w;
  k.stride_h = geom_.stride_h;
  k.stride_w = geom_.stride_w;
  k.pad_h = geom_.pad_h;
  k.pad_w = geom_.pad_w;
  k.groups = groups_;
  k.tf32 = options_.allow_tf32 && options_.dtype == DType::F32;
  k.deterministic = options_.deterministic;
  k.data = options_.dtype;
  k.channels_last = options_.channels_last;
  return algorithmKey(k);
}

CudnnConv::Plan& CudnnConv::planFor(int64_t n) {
  if (n < 1)
    throw ShapeError("cuDNN: " + describe_ + ": batch size " + std::to_string(n) + " must be at least 1");
  auto found = plans_.find(n);
  if (found != plans_.end()) return *found->second;

  std::unique_ptr<Plan> plan;
  try {
    const cudnnDataType_t type = cudnnDataTypeOf(options_.dtype);
    const cudnnTensorFormat_t format = options_.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    plan = std::make_unique<Plan>(
        CudnnTensorDescriptor(n, geom_.channels, geom_.height, geom_.width, type, format),
        CudnnTensorDescriptor(n, filters_, geom_.outHeight(), geom_.outWidth(), type, format));
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
  ++searches_;
  return *plans_.emplace(n, std::move(plan)).first->second;
}

bool CudnnConv::workspaceOf(cudnnHandle_t handle, Plan& plan, ConvPass pass, int algo, cudnnMathType_t math,
                            size_t& bytes) {
  conv_.setMathType(math);
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  switch (pass) {
    case ConvPass::Forward:
      status = cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x.get(), filter_.get(), conv_.get(),
                                                       plan.y.get(),
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case ConvPass::BackwardData:
      status = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, filter_.get(), plan.y.get(), conv_.get(), plan.x.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case ConvPass::BackwardFilter:
      status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, plan.x.get(), plan.y.get(), conv_.get(), filter_.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return status == CUDNN_STATUS_SUCCESS;
}

CudnnConv::Choice& CudnnConv::heuristicChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass) {
  Choice& choice = plan.of(pass);
  if (choice.chosen) return choice;
  conv_.setMathType(searchMath(options_));
  int count = 0;
  std::vector<Candidate> ranked;
  switch (pass) {
    case ConvPass::Forward: {
      check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count), "count forward algorithms", n);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
      check(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x.get(), filter_.get(), conv_.get(),
                                                   plan.y.get(), count, &count, perf.data()),
            "rank forward algorithms", n);
      ranked = candidates(perf, count);
      break;
    }
    case ConvPass::BackwardData: {
      check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count),
            "count backward-data algorithms", n);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
      check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, filter_.get(), plan.y.get(), conv_.get(),
                                                        plan.x.get(), count, &count, perf.data()),
            "rank backward-data algorithms", n);
      ranked = candidates(perf, count);
      break;
    }
    case ConvPass::BackwardFilter: {
      check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count),
            "count backward-filter algorithms", n);
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan.x.get(), plan.y.get(), conv_.get(),
                                                          filter_.get(), count, &count, perf.data()),
            "rank backward-filter algorithms", n);
      ranked = candidates(perf, count);
      break;
    }
  }
  // cuDNN's ranking, deterministic ones first; with `deterministic` only those.
  const std::vector<bool> rounds =
      options_.deterministic ? std::vector<bool>{true} : std::vector<bool>{true, false};
  for (bool deterministic_round : rounds)
    for (const Candidate& c : ranked) {
      if (!c.ok || c.deterministic != deterministic_round ||
          !mathAccepted(c.math, tensorOpsAllowed(options_)))
        continue;
      size_t bytes = 0;
      if (!workspaceOf(handle, plan, pass, c.algo, c.math, bytes) || bytes > options_.workspace_limit)
        continue;
      choice.chosen = true;
      choice.algo = c.algo;
      choice.math = c.math;
      choice.bytes = bytes;
      choice.deterministic = c.deterministic;
      choice.how = Choice::How::Heuristic;
      choice.time_ms = 0;
      return choice;
    }
  throw DeviceError("cuDNN: no " + std::string(options_.deterministic ? "deterministic " : "") +
                    convPassName(pass) + " algorithm for " + describe_ + ", batch " + std::to_string(n) +
                    (tensorOpsAllowed(options_) ? "" : " in full fp32 (FMA) math") +
                    " fits the workspace limit of " + std::to_string(options_.workspace_limit) +
                    " bytes; raise [job] gpu_workspace_mb" +
                    (options_.deterministic ? " or set [job] deterministic = false" : ""));
}

bool CudnnConv::cachedChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass,
                             const std::string& k) {
  const std::optional<AlgorithmChoice> entry = options_.cache->find(k);
  if (!entry) return false;
  // Taken only when this cuDNN can still run it within the limit.
  const auto math = static_cast<cudnnMathType_t>(entry->math);
  size_t bytes = 0;
  if (!mathAccepted(math, tensorOpsAllowed(options_)) || entry->algo < 0 ||
      !workspaceOf(handle, plan, pass, static_cast<int>(entry->algo), math, bytes) ||
      bytes > options_.workspace_limit)
    return false;
  (void)n;
  Choice& choice = plan.of(pass);
  choice.chosen = true;
  choice.algo = static_cast<int>(entry->algo);
  choice.math = math;
  choice.bytes = bytes;
  choice.deterministic = entry->config.empty() ? options_.deterministic : entry->config[0] != 0;
  choice.how = Choice::How::Cached;
  choice.time_ms = entry->time_ms;
  return true;
}

bool CudnnConv::measuredChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass,
                               const ConvOperands& op, const ScratchMemory& scratch) {
  const bool have_operands = pass == ConvPass::Forward        ? op.x && op.w && op.y
                             : pass == ConvPass::BackwardData ? op.w && op.dy && op.dx
                                                              : op.x && op.dy;
  if (!have_operands || !scratch) return false;
  // As much of the limit as the allocator can give, halving on refusal.
  size_t ws_bytes = options_.workspace_limit;
  std::shared_ptr<void> ws;
  while (ws_bytes >= kSmallestSearchWorkspace && !(ws = scratch(ws_bytes))) ws_bytes /= 2;
  if (!ws) ws_bytes = 0;
  // Backward-filter's search writes a gradient: into a scratch copy (of the
  // filter's type), so the accumulated one is untouched.
  std::shared_ptr<void> dw;
  if (pass == ConvPass::BackwardFilter) {
    dw =
        scratch(static_cast<size_t>(filters_ * (geom_.channels / groups_) * geom_.kernel_h * geom_.kernel_w) *
                elementSize(options_.dtype));
    if (!dw) return false;
  }

  struct Timings {
    std::vector<double> times;
    size_t memory = 0;
    bool deterministic = false;
  };
  std::map<std::pair<int, int>, Timings> timed;  // by (algo, math): a fixed order for ties
  int count = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    conv_.setMathType(searchMath(options_));
    std::vector<Candidate> found;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    switch (pass) {
      case ConvPass::Forward: {
        if (cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count) != CUDNN_STATUS_SUCCESS) return false;
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
        status = cudnnFindConvolutionForwardAlgorithmEx(handle, plan.x.get(), op.x, filter_.get(), op.w,
                                                        conv_.get(), plan.y.get(), op.y, count, &count,
                                                        perf.data(), ws.get(), ws_bytes);
        found = candidates(perf, count);
        break;
      }
      case ConvPass::BackwardData: {
        if (cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count) != CUDNN_STATUS_SUCCESS)
          return false;
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
        status = cudnnFindConvolutionBackwardDataAlgorithmEx(handle, filter_.get(), op.w, plan.y.get(), op.dy,
                                                             conv_.get(), plan.x.get(), op.dx, count, &count,
                                                             perf.data(), ws.get(), ws_bytes);
        found = candidates(perf, count);
        break;
      }
      case ConvPass::BackwardFilter: {
        if (cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count) != CUDNN_STATUS_SUCCESS)
          return false;
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
        status = cudnnFindConvolutionBackwardFilterAlgorithmEx(
            handle, plan.x.get(), op.x, plan.y.get(), op.dy, conv_.get(), filter_.get(), dw.get(), count,
            &count, perf.data(), ws.get(), ws_bytes);
        found = candidates(perf, count);
        break;
      }
    }
    if (status != CUDNN_STATUS_SUCCESS) return false;  // the heuristics decide instead
    for (const Candidate& c : found) {
      if (!c.ok || !mathAccepted(c.math, tensorOpsAllowed(options_)) ||
          (options_.deterministic && !c.deterministic) || c.memory > ws_bytes)
        continue;
      Timings& t = timed[{c.algo, static_cast<int>(c.math)}];
      t.times.push_back(c.time_ms);
      t.memory = std::max(t.memory, c.memory);
      t.deterministic = c.deterministic;
    }
  }

  // Fastest median first; the map's order breaks ties.
  std::vector<std::pair<double, std::pair<int, int>>> order;
  for (const auto& [id, t] : timed) order.push_back({median(t.times), id});
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [time_ms, id] : order) {
    const auto math = static_cast<cudnnMathType_t>(id.second);
    size_t bytes = 0;
    if (!workspaceOf(handle, plan, pass, id.first, math, bytes)) continue;
    bytes = std::max(bytes, timed[id].memory);
    if (bytes > options_.workspace_limit) continue;
    Choice& choice = plan.of(pass);
    choice.chosen = true;
    choice.algo = id.first;
    choice.math = math;
    choice.bytes = bytes;
    choice.deterministic = timed[id].deterministic;
    choice.how = Choice::How::Measured;
    choice.time_ms = time_ms;
    ++measurements_;
    if (options_.cache) {
      AlgorithmChoice record;
      record.algo = choice.algo;
      record.math = choice.math;
      record.workspace_bytes = choice.bytes;
      record.time_ms = time_ms;
      record.config = {choice.deterministic ? 1 : 0};
      options_.cache->record(key(n, pass), record);
    }
    return true;
  }
  return false;
}

void CudnnConv::choose(cudnnHandle_t handle, int64_t n, ConvPass pass, const ConvOperands& operands,
                       const ScratchMemory& scratch) {
  if (n == 0) return;
  Plan& plan = planFor(n);
  Choice& choice = plan.of(pass);
  if (choice.searched) return;
  choice.searched = true;
  choice.chosen = false;  // a heuristic choice made before gives way to a measured one
  if (options_.cache && cachedChoice(handle, plan, n, pass, key(n, pass))) return;
  if (measuredChoice(handle, plan, n, pass, operands, scratch)) return;
  heuristicChoice(handle, plan, n, pass);
}

size_t CudnnConv::workspaceBytes(cudnnHandle_t handle, int64_t n, ConvPass pass) {
  if (n == 0) return 0;
  return heuristicChoice(handle, planFor(n), n, pass).bytes;
}

size_t CudnnConv::workspaceBytes(cudnnHandle_t handle, int64_t n) {
  if (n == 0) return 0;
  return std::max({workspaceBytes(handle, n, ConvPass::Forward),
                   workspaceBytes(handle, n, ConvPass::BackwardData),
                   workspaceBytes(handle, n, ConvPass::BackwardFilter)});
}

const CudnnConv::Choice& CudnnConv::checkedChoice(cudnnHandle_t handle, int64_t n, ConvPass pass,
                                                  size_t workspace_bytes) {
  const Choice& choice = heuristicChoice(handle, planFor(n), n, pass);
  if (workspace_bytes < choice.bytes)
    throw DeviceError("cuDNN: convolution " + std::string(convPassName(pass)) + " for " + describe_ +
                      ", batch " + std::to_string(n) + ": a workspace of " + std::to_string(workspace_bytes) +
                      " bytes is smaller than the " + std::to_string(choice.bytes) +
                      " bytes workspaceBytes(" + std::to_string(n) + ") asked for");
  return choice;
}

void CudnnConv::forward(cudnnHandle_t handle, const void* x, const void* w, void* y, int64_t n,
                        void* workspace, size_t workspace_bytes) {
  if (n == 0) return;
  const Choice& c = checkedChoice(handle, n, ConvPass::Forward, workspace_bytes);
  const Plan& plan = *plans_.at(n);
  const float one = 1.0f, zero = 0.0f;
  conv_.setMathType(c.math);
  check(cudnnConvolutionForward(handle, &one, plan.x.get(), x, filter_.get(), w, conv_.get(),
                                static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), workspace, workspace_bytes,
                                &zero, plan.y.get(), y),
        "convolution forward", n);
}

void CudnnConv::backwardData(cudnnHandle_t handle, const void* w, const void* dy, void* dx, int64_t n,
                             void* workspace, size_t workspace_bytes) {
  if (n == 0) return;
  const Choice& c = checkedChoice(handle, n, ConvPass::BackwardData, workspace_bytes);
  const Plan& plan = *plans_.at(n);
  const float one = 1.0f, zero = 0.0f;
  conv_.setMathType(c.math);
  check(cudnnConvolutionBackwardData(handle, &one, filter_.get(), w, plan.y.get(), dy, conv_.get(),
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), workspace,
                                     workspace_bytes, &zero, plan.x.get(), dx),
        "convolution backward-data", n);
}

void CudnnConv::backwardFilter(cudnnHandle_t handle, const void* x, const void* dy, void* dw, int64_t n,
                               void* workspace, size_t workspace_bytes, bool accumulate) {
  if (n == 0) return;
  const Choice& c = checkedChoice(handle, n, ConvPass::BackwardFilter, workspace_bytes);
  const Plan& plan = *plans_.at(n);
  // alpha and beta are floats for every data type (the compute type's);
  // beta = 1 accumulates into dw, 0 overwrites it.
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  conv_.setMathType(c.math);
  check(cudnnConvolutionBackwardFilter(handle, &one, plan.x.get(), x, plan.y.get(), dy, conv_.get(),
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), workspace,
                                       workspace_bytes, &beta, filter_.get(), dw),
        "convolution backward-filter", n);
}

double CudnnConv::chosenMilliseconds(int64_t n, ConvPass pass) const {
  auto found = plans_.find(n);
  if (found == plans_.end()) return -1;
  const Choice& c = found->second->passes[passIndex(pass)];
  return c.chosen && c.how != Choice::How::Heuristic ? c.time_ms : -1;
}

std::string CudnnConv::algorithms(int64_t n) const {
  auto found = plans_.find(n);
  if (found == plans_.end()) return "no algorithms chosen yet for batch " + std::to_string(n);
  std::string text;
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter}) {
    const Choice& c = found->second->passes[passIndex(pass)];
    text += (text.empty() ? "" : ", ") + std::string(convPassName(pass)) + " ";
    if (!c.chosen) {
      text += "not chosen";
      continue;
    }
    text += algoName(pass, c.algo);
    if (c.math != CUDNN_FMA_MATH)
      text += options_.dtype == DType::F32 ? " (TF32 allowed)" : " (tensor cores allowed)";
    if (!c.deterministic) text += " (non-deterministic)";
    char ms[48];
    std::snprintf(ms, sizeof ms, "%.3f ms", c.time_ms);
    text += c.how == Choice::How::Measured ? " " + std::string(ms)
            : c.how == Choice::How::Cached ? " (cached, " + std::string(ms) + ")"
                                           : std::string(" (heuristic)");
  }
  return text;
}

}  // namespace dtrain
