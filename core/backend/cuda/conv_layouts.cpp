#include "core/backend/cuda/conv_layouts.h"

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/layout_kernels.h"
#include "core/backend/cuda/median_time.h"
#include "core/errors.h"

namespace dtrain {

namespace {

constexpr int kUndecided = -1;
constexpr size_t kCopyAlignment = 256;

size_t aligned(size_t bytes) { return (bytes + kCopyAlignment - 1) / kCopyAlignment * kCopyAlignment; }

int passIndex(ConvPass pass) { return static_cast<int>(pass); }

ConvAlgoOptions inNhwc(ConvAlgoOptions o) {
  o.channels_last = true;
  return o;
}

}  // namespace

ConvLayouts::ConvLayouts(const ops::Window2d& geom, int64_t filters, const ConvAlgoOptions& options,
                         int64_t groups)
    : geom_(geom),
      filters_(filters),
      groups_(groups),
      options_(options),
      nchw_(geom, filters, options, groups) {
  if (options.dtype != DType::F32) nhwc_ = std::make_unique<CudnnConv>(geom, filters, inNhwc(options), groups);
}

ConvLayouts::~ConvLayouts() = default;

int64_t ConvLayouts::inputElements(int64_t n) const { return n * geom_.channels * geom_.height * geom_.width; }
int64_t ConvLayouts::outputElements(int64_t n) const { return n * filters_ * geom_.outPlane(); }
int64_t ConvLayouts::filterElements() const {
  return filters_ * (geom_.channels / groups_) * geom_.kernel_h * geom_.kernel_w;
}

size_t ConvLayouts::copyBytes(int64_t n) const {
  const size_t e = elementSize(options_.dtype);
  return aligned(static_cast<size_t>(inputElements(n)) * e) + aligned(static_cast<size_t>(outputElements(n)) * e) +
         aligned(static_cast<size_t>(filterElements()) * e);
}

ConvLayouts::Copies ConvLayouts::copiesIn(void* workspace, size_t workspace_bytes, int64_t n) const {
  const size_t copies = copyBytes(n);
  if (workspace_bytes < copies)
    throw DeviceError("cuDNN: " + nchw_.describe() + ": a workspace of " + std::to_string(workspace_bytes) +
                      " bytes cannot hold the " + std::to_string(copies) + " bytes of its channels-last copies");
  const size_t e = elementSize(options_.dtype);
  Copies c;
  c.input = static_cast<char*>(workspace);
  c.output = c.input + aligned(static_cast<size_t>(inputElements(n)) * e);
  c.filter = c.output + aligned(static_cast<size_t>(outputElements(n)) * e);
  c.rest = c.input + copies;
  c.rest_bytes = workspace_bytes - copies;
  return c;
}

void ConvLayouts::inputToNhwc(const void* src, void* dst, int64_t n, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, n, geom_.channels, geom_.height * geom_.width, stream);
}
void ConvLayouts::inputToNchw(const void* src, void* dst, int64_t n, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, n, geom_.height * geom_.width, geom_.channels, stream);
}
void ConvLayouts::outputToNhwc(const void* src, void* dst, int64_t n, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, n, filters_, geom_.outPlane(), stream);
}
void ConvLayouts::outputToNchw(const void* src, void* dst, int64_t n, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, n, geom_.outPlane(), filters_, stream);
}
void ConvLayouts::filterToNhwc(const void* src, void* dst, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, filters_, geom_.channels / groups_,
                         geom_.kernel_h * geom_.kernel_w, stream);
}
void ConvLayouts::filterToNchw(const void* src, void* dst, cudaStream_t stream) const {
  cuda::transposeLastTwo(src, dst, options_.dtype, filters_, geom_.kernel_h * geom_.kernel_w,
                         geom_.channels / groups_, stream);
}

bool ConvLayouts::channelsLast(int64_t n, ConvPass pass) const {
  auto found = layout_.find(n);
  return nhwc_ && found != layout_.end() && found->second[passIndex(pass)] == 1;
}

void ConvLayouts::choose(cudnnHandle_t handle, cudaStream_t stream, int64_t n, ConvPass pass,
                         const ConvOperands& op, const ScratchMemory& scratch) {
  if (n == 0) return;
  nchw_.choose(handle, n, pass, op, scratch);
  if (!nhwc_) return;
  auto& decided = layout_.try_emplace(n, std::array<int, 3>{kUndecided, kUndecided, kUndecided}).first->second;
  int& layout = decided[passIndex(pass)];
  if (layout != kUndecided) return;
  layout = 0;  // NCHW unless channels-last is measured faster (or was)

  const bool have_operands = pass == ConvPass::Forward        ? op.x && op.w
                             : pass == ConvPass::BackwardData ? op.w && op.dy && op.dx
                                                              : op.x && op.dy;
  const size_t e = elementSize(options_.dtype);
  std::shared_ptr<void> in, out, w, w_back;
  if (!have_operands || !scratch || !(in = scratch(static_cast<size_t>(inputElements(n)) * e)) ||
      !(out = scratch(static_cast<size_t>(outputElements(n)) * e)) ||
      !(w = scratch(static_cast<size_t>(filterElements()) * e)) ||
      !(w_back = scratch(static_cast<size_t>(filterElements()) * e)))
    return;
  // The pass's inputs in NHWC (its outputs are written by the search), then
  // its NHWC algorithm, chosen as the NCHW one was.
  ConvOperands t;
  auto transposeIn = [&] {
    switch (pass) {
      case ConvPass::Forward:
        inputToNhwc(op.x, in.get(), n, stream);
        filterToNhwc(op.w, w.get(), stream);
        break;
      case ConvPass::BackwardData:
        outputToNhwc(op.dy, out.get(), n, stream);
        filterToNhwc(op.w, w.get(), stream);
        break;
      case ConvPass::BackwardFilter:
        inputToNhwc(op.x, in.get(), n, stream);
        outputToNhwc(op.dy, out.get(), n, stream);
        break;
    }
  };
  transposeIn();
  t.x = in.get();
  t.w = w.get();
  t.y = out.get();
  t.dy = out.get();
  t.dx = in.get();
  nhwc_->choose(handle, n, pass, t, scratch);

  if (options_.cache) {
    const std::optional<AlgorithmChoice> cached = options_.cache->find("layout " + nchw_.key(n, pass));
    if (cached && (cached->algo == 0 || cached->algo == 1)) {
      layout = static_cast<int>(cached->algo);
      return;
    }
  }
  const double nchw_ms = nchw_.chosenMilliseconds(n, pass), nhwc_ms = nhwc_->chosenMilliseconds(n, pass);
  if (nchw_ms < 0 || nhwc_ms < 0) return;  // one of them was not measured: nothing to compare
  // The transpositions the pass adds, in and out, on the same buffers. The
  // outputs go where the pass itself writes next (y, dx) or to a scratch (dw).
  const double transposes_ms = medianMilliseconds(stream, 3, [&] {
    transposeIn();
    switch (pass) {
      case ConvPass::Forward:
        outputToNchw(out.get(), op.y, n, stream);
        break;
      case ConvPass::BackwardData:
        inputToNchw(in.get(), op.dx, n, stream);
        break;
      case ConvPass::BackwardFilter:
        filterToNchw(w.get(), w_back.get(), stream);
        break;
    }
    return cudaGetLastError() == cudaSuccess;
  });
  if (transposes_ms < 0) return;
  layout = nhwc_ms + transposes_ms < nchw_ms ? 1 : 0;
  if (options_.cache) {
    AlgorithmChoice record;
    record.algo = layout;
    record.time_ms = layout == 1 ? nhwc_ms + transposes_ms : nchw_ms;
    options_.cache->record("layout " + nchw_.key(n, pass), record);
  }
}

size_t ConvLayouts::workspaceBytes(cudnnHandle_t handle, int64_t n, ConvPass pass) {
  if (!channelsLast(n, pass)) return nchw_.workspaceBytes(handle, n, pass);
  return copyBytes(n) + nhwc_->workspaceBytes(handle, n, pass);
}

void ConvLayouts::forward(cudnnHandle_t handle, cudaStream_t stream, const void* x, const void* w, void* y,
                          int64_t n, void* workspace, size_t workspace_bytes) {
  if (!channelsLast(n, ConvPass::Forward)) {
    nchw_.forward(handle, x, w, y, n, workspace, workspace_bytes);
    return;
  }
  const Copies c = copiesIn(workspace, workspace_bytes, n);
  inputToNhwc(x, c.input, n, stream);
  filterToNhwc(w, c.filter, stream);
  nhwc_->forward(handle, c.input, c.filter, c.output, n, c.rest, c.rest_bytes);
  outputToNchw(c.output, y, n, stream);
}

void ConvLayouts::backwardData(cudnnHandle_t handle, cudaStream_t stream, const void* w, const void* dy, void* dx,
                               int64_t n, void* workspace, size_t workspace_bytes) {
  if (!channelsLast(n, ConvPass::BackwardData)) {
    nchw_.backwardData(handle, w, dy, dx, n, workspace, workspace_bytes);
    return;
  }
  const Copies c = copiesIn(workspace, workspace_bytes, n);
  outputToNhwc(dy, c.output, n, stream);
  filterToNhwc(w, c.filter, stream);
  nhwc_->backwardData(handle, c.filter, c.output, c.input, n, c.rest, c.rest_bytes);
  inputToNchw(c.input, dx, n, stream);
}

void ConvLayouts::backwardFilter(cudnnHandle_t handle, cudaStream_t stream, const void* x, const void* dy, void* dw,
                                 int64_t n, void* workspace, size_t workspace_bytes, bool accumulate) {
  if (!channelsLast(n, ConvPass::BackwardFilter)) {
    nchw_.backwardFilter(handle, x, dy, dw, n, workspace, workspace_bytes, accumulate);
    return;
  }
  if (accumulate)
    throw DeviceError("cuDNN: " + nchw_.describe() +
                      ": a channels-last weight gradient overwrites its scratch; it cannot accumulate");
  const Copies c = copiesIn(workspace, workspace_bytes, n);
  inputToNhwc(x, c.input, n, stream);
  outputToNhwc(dy, c.output, n, stream);
  nhwc_->backwardFilter(handle, c.input, c.output, c.filter, n, c.rest, c.rest_bytes, /*accumulate=*/false);
  filterToNchw(c.filter, dw, stream);
}

std::string ConvLayouts::algorithms(int64_t n) const {
  std::string text = nchw_.algorithms(n);
  if (!nhwc_) return text;
  std::string nhwc_passes;
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter})
    if (channelsLast(n, pass)) nhwc_passes += std::string(nhwc_passes.empty() ? "" : ", ") + convPassName(pass);
  if (nhwc_passes.empty()) return text + "; all NCHW";
  return text + "; channels-last (transposes included) for " + nhwc_passes + ": " + nhwc_->algorithms(n);
}

}  // namespace dtrain
