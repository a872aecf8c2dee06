// One convolution layer's cuDNN state: the filter and convolution
// descriptors, and per batch size the tensor descriptors and, per pass
// (forward, backward-data, backward-filter), the algorithm with its math type
// and workspace.
//
// Algorithms are chosen by measurement (choose()): every algorithm cuDNN
// offers for the pass is run on the layer's own buffers by
// cudnnFind*AlgorithmEx, three times, and the one with the smallest median
// time is kept, as PyTorch's cudnn.benchmark does (which times its first ten
// candidates once). The search runs once per shape, at the first step: it
// synchronises the stream and borrows a workspace of up to the limit (less
// when the allocator cannot give that much). Its choice goes into the
// AlgorithmCache when there is one, and a choice found there for the same key
// (this GPU, these libraries) is taken without timing, so a resume computes
// with the same algorithms. A pass that was never chosen by measurement (or
// whose measurement found nothing usable) falls back to cuDNN's heuristics
// (cudnnGet*Algorithm_v7), which run nothing on the GPU.
//
// Candidates: with `deterministic` only algorithms cuDNN marks deterministic
// (bitwise-repeatable results: no atomic sums); without it any. With
// allow_tf32 false only FMA (full fp32) kernels are accepted, so results
// match the CPU within fp32 rounding; with it true TF32 tensor-core kernels
// are allowed too. An algorithm needing more workspace than the limit is
// never a candidate.
//
// Data types: fp32, or (a 16-bit precision) bf16 or fp16 x, w, y and their
// gradients, every descriptor of that type and the convolution's compute type
// fp32 (cuDNN's pseudo-half configurations: fp32 sums, stored rounded). For
// 16-bit data tensor-core kernels are candidates (CUDNN_TENSOR_OP_MATH, with
// cuDNN's other non-converting kernels); allow_tf32 concerns fp32 only. The
// data type is part of every key, so a choice timed for fp32 is never taken
// for bf16. cuDNN's backward-filter writes dw in the filter's type: a 16-bit
// layer lets it overwrite a 16-bit scratch and adds that to its fp32
// gradient (core/nn/cuda/cuda_conv2d.h). One instance convolves NCHW
// tensors, or with options.channels_last NHWC ones (its own keys);
// core/backend/cuda/conv_layouts.h runs a 16-bit layer's passes in whichever
// layout is faster.
//
// Ownership and threading: device pointers are the caller's. One instance is
// used by one thread (its layer's); calls queue work on the handle's stream
// and, apart from a search, do not synchronise.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/backend/algorithm_keys.h"
#include "core/backend/cuda/cudnn_descriptors.h"
#include "core/backend/cuda/library_memory.h"
#include "core/backend/ops.h"

namespace dtrain {

class AlgorithmCache;

struct ConvAlgoOptions {
  DType dtype = DType::F32;  // of x, w, y, dx, dy and the dw cuDNN writes
  // Every buffer channels-last: x, y and their gradients [n, H, W, C], the
  // filters [F, kh, kw, C/G] (core/backend/cuda/conv_layouts.h runs a pass
  // so when that is faster).
  bool channels_last = false;
  bool allow_tf32 = false;   // fp32 data only
  bool deterministic = true;
  size_t workspace_limit = size_t{1024} << 20;
  AlgorithmCache* cache = nullptr;  // shared; may be null
};

// The buffers of one pass, for timing on them. Forward reads x and w and
// writes y; backward-data reads w and dy and writes dx; backward-filter reads
// x and dy and writes a scratch buffer, never the accumulated gradient.
// Outputs written by a search are overwritten by the pass that follows it.
// Elements of the options' dtype.
struct ConvOperands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  void* dx = nullptr;
};

class CudnnConv {
 public:
  // geom: the input [C,H,W], kernel, stride and padding; filters: F; groups:
  // G (weights [F, C/G, kh, kw]; group g's filters read only its C/G
  // channels). Throws ShapeError for a geometry without output or a G that
  // does not divide C and F.
  CudnnConv(const ops::Window2d& geom, int64_t filters, const ConvAlgoOptions& options, int64_t groups = 1);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Chooses `pass`'s algorithm for a batch of n by measurement on
  // `operands` (or from the cache), borrowing the search's workspace and a
  // scratch weight gradient from `scratch`; nothing when it is chosen already. Work
  // producing the operands must be queued on the handle's stream before.
  // Throws DeviceError when no algorithm fits the workspace limit.
  void choose(cudnnHandle_t handle, int64_t n, ConvPass pass, const ConvOperands& operands,
              const ScratchMemory& scratch);

  // Workspace bytes `pass` needs for a batch of n; chooses the pass's
  // algorithm by cuDNN's heuristics first if nothing chose it (host work
  // only). Throws DeviceError when no algorithm fits the workspace limit.
  size_t workspaceBytes(cudnnHandle_t handle, int64_t n, ConvPass pass);
  // The largest of the three passes' workspaces (choosing them likewise).
  size_t workspaceBytes(cudnnHandle_t handle, int64_t n);

  // The passes below choose by heuristics if nothing chose for n, and throw
  // DeviceError when workspace_bytes < workspaceBytes(n, pass). A batch of 0
  // does nothing; a negative one throws ShapeError. Every buffer holds
  // elements of the options' dtype.
  // y [n,F,Ho,Wo] = conv(x [n,C,H,W], w [F,C/G,kh,kw]), overwriting y. No bias.
  void forward(cudnnHandle_t handle, const void* x, const void* w, void* y, int64_t n, void* workspace,
               size_t workspace_bytes);
  // dx [n,C,H,W] = the input gradient from dy [n,F,Ho,Wo], overwriting dx.
  void backwardData(cudnnHandle_t handle, const void* w, const void* dy, void* dx, int64_t n, void* workspace,
                    size_t workspace_bytes);
  // dw [F,C/G,kh,kw] += the weight gradient when `accumulate`, else dw = it
  // (a 16-bit layer's scratch: a batch of 0 then leaves dw as it was).
  void backwardFilter(cudnnHandle_t handle, const void* x, const void* dy, void* dw, int64_t n,
                      void* workspace, size_t workspace_bytes, bool accumulate = true);

  // "fwd IMPLICIT_PRECOMP_GEMM 0.114 ms, bwd-data ALGO_1 0.319 ms,
  // bwd-filter WINOGRAD_NONFUSED 0.145 ms" for batch n, for logs and
  // `dtrain bench step`: the measured median time, or "(cached)" or
  // "(heuristic)" for a choice not timed by this process; a non-deterministic
  // choice and TF32 math (tensor-core math for 16-bit data) are marked. Says
  // so when nothing was chosen for n yet, and "not chosen" for a pass not run
  // yet.
  std::string algorithms(int64_t n) const;
  // How many batch sizes have descriptors (each is set up once).
  int64_t searches() const { return searches_; }
  // How many passes were timed on the GPU (not taken from the cache).
  int64_t measurements() const { return measurements_; }
  // "conv 5x11x11 -> 7x11x11, kernel 3x3, stride 1x1, padding 1x1" (and
  // ", 4 groups" when grouped), for messages.
  const std::string& describe() const { return describe_; }
  DType dtype() const { return options_.dtype; }
  // The chosen algorithm's measured median time for `pass` at batch n (this
  // process's or the cache's), or a negative number when the pass has no
  // measured choice (none yet, or cuDNN's heuristics chose).
  double chosenMilliseconds(int64_t n, ConvPass pass) const;
  // The AlgorithmCache key of `pass` at batch n (core/backend/algorithm_keys.h).
  std::string key(int64_t n, ConvPass pass) const;

 private:
  struct Choice;
  struct Plan;
  Plan& planFor(int64_t n);
  Choice& heuristicChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass);
  bool cachedChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass, const std::string& key);
  bool measuredChoice(cudnnHandle_t handle, Plan& plan, int64_t n, ConvPass pass,
                      const ConvOperands& operands, const ScratchMemory& scratch);
  // The workspace (algo, math) needs for the pass; false when cuDNN cannot run that pair.
  bool workspaceOf(cudnnHandle_t handle, Plan& plan, ConvPass pass, int algo, cudnnMathType_t math,
                   size_t& bytes);
  const Choice& checkedChoice(cudnnHandle_t handle, int64_t n, ConvPass pass, size_t workspace_bytes);
  void check(cudnnStatus_t status, const char* what, int64_t n) const;

  ops::Window2d geom_;
  int64_t filters_;
  int64_t groups_;
  ConvAlgoOptions options_;
  std::string describe_;
  CudnnFilterDescriptor filter_;
  CudnnConvolutionDescriptor conv_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
  int64_t searches_ = 0;
  int64_t measurements_ = 0;
};

}  // namespace dtrain
