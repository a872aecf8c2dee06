// A convolution layer's cuDNN convolution in two layouts: each pass runs on
// the layer's NCHW tensors, or, for 16-bit data, on channels-last (NHWC)
// copies, whichever the timing says is faster.
//
// cuDNN's fastest tensor-core kernels read NHWC; given NCHW data it chooses
// among kernels that work in NCHW or transpose internally. The network's
// tensors stay NCHW (every other layer and the CPU's reference read them
// so), so the channels-last way of a pass costs its transpositions too:
// forward transposes x and the weights in and y out, backward-data dy and
// the weights in and dx out, backward-filter x and dy in and dw out. Both
// layouts' algorithms are chosen by measurement (two CudnnConv, the NHWC one
// keyed apart), the transpositions of the pass are timed on the same
// buffers, and the pass runs channels-last when its algorithm plus its
// transpositions take less time than the NCHW algorithm. The decision goes
// into the AlgorithmCache beside the algorithms, so a resume takes it. fp32
// data (and a pass whose NHWC search found nothing) runs in NCHW only.
//
// The transposed copies live at the front of the pass's workspace
// (workspaceBytes includes them), so they cost no memory beyond the one
// workspace every convolution shares. Threading and ownership as CudnnConv.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <map>
#include <memory>
#include <string>

#include "core/backend/cuda/cudnn_conv.h"

namespace dtrain {

class ConvLayouts {
 public:
  ConvLayouts(const ops::Window2d& geom, int64_t filters, const ConvAlgoOptions& options, int64_t groups = 1);
  ~ConvLayouts();
  ConvLayouts(const ConvLayouts&) = delete;
  ConvLayouts& operator=(const ConvLayouts&) = delete;

  // CudnnConv::choose for both layouts, then the layout (see above).
  // `stream` is the handle's.
  void choose(cudnnHandle_t handle, cudaStream_t stream, int64_t n, ConvPass pass, const ConvOperands& operands,
              const ScratchMemory& scratch);
  // The pass's workspace: its algorithm's, plus the transposed copies when it
  // runs channels-last.
  size_t workspaceBytes(cudnnHandle_t handle, int64_t n, ConvPass pass);

  // CudnnConv's passes on NCHW buffers, with its meaning (backwardFilter's
  // `accumulate` must be false for a pass that runs channels-last: only
  // 16-bit data does, and its layer overwrites a scratch).
  void forward(cudnnHandle_t handle, cudaStream_t stream, const void* x, const void* w, void* y, int64_t n,
               void* workspace, size_t workspace_bytes);
  void backwardData(cudnnHandle_t handle, cudaStream_t stream, const void* w, const void* dy, void* dx, int64_t n,
                    void* workspace, size_t workspace_bytes);
  void backwardFilter(cudnnHandle_t handle, cudaStream_t stream, const void* x, const void* dy, void* dw,
                      int64_t n, void* workspace, size_t workspace_bytes, bool accumulate);

  // CudnnConv::algorithms of the layout each pass runs in, an NHWC pass marked.
  std::string algorithms(int64_t n) const;
  DType dtype() const { return nchw_.dtype(); }

 private:
  // Whether `pass` at batch n runs channels-last (decided by choose()).
  bool channelsLast(int64_t n, ConvPass pass) const;
  // Element counts of x [n,C,H,W], y [n,F,Ho,Wo] and the filters.
  int64_t inputElements(int64_t n) const;
  int64_t outputElements(int64_t n) const;
  int64_t filterElements() const;
  // The bytes of the transposed copies a pass uses (input, output and
  // filters, each 256-byte aligned), at the front of its workspace.
  size_t copyBytes(int64_t n) const;
  // Where those copies lie in `workspace`, and what is left for cuDNN;
  // throws DeviceError when the workspace cannot hold them.
  struct Copies {
    char *input, *output, *filter;
    void* rest;
    size_t rest_bytes;
  };
  Copies copiesIn(void* workspace, size_t workspace_bytes, int64_t n) const;
  // x [n,C,HW] <-> [n,HW,C], y likewise with F, w [F,C/G,khkw] <-> [F,khkw,C/G].
  void inputToNhwc(const void* src, void* dst, int64_t n, cudaStream_t stream) const;
  void inputToNchw(const void* src, void* dst, int64_t n, cudaStream_t stream) const;
  void outputToNhwc(const void* src, void* dst, int64_t n, cudaStream_t stream) const;
  void outputToNchw(const void* src, void* dst, int64_t n, cudaStream_t stream) const;
  void filterToNhwc(const void* src, void* dst, cudaStream_t stream) const;
  void filterToNchw(const void* src, void* dst, cudaStream_t stream) const;

  ops::Window2d geom_;
  int64_t filters_, groups_;
  ConvAlgoOptions options_;
  CudnnConv nchw_;
  std::unique_ptr<CudnnConv> nhwc_;  // 16-bit data only
  // Per batch size, per pass: 1 channels-last, 0 NCHW; absent: not decided (NCHW).
  std::map<int64_t, std::array<int, 3>> layout_;
};

}  // namespace dtrain
