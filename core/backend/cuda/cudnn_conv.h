// One convolution layer's cuDNN state: the filter and convolution
// descriptors, and per batch size the tensor descriptors and the algorithm
// (with its math type and workspace) for each of the three passes.
//
// Algorithms are chosen once per batch size, on first use, by cuDNN's
// heuristics (cudnnGet*Algorithm_v7) rather than by benchmarking
// (cudnnFind*): the heuristics run nothing on the GPU (no synchronisation, no
// workspace allocated behind the caching allocator's back), and their answer
// depends only on the shape, the GPU and the cuDNN version, not on timing
// noise, so two runs of a job, and a resumed run, pick the same algorithms and
// compute the same bits. For the same reason deterministic algorithms are
// preferred; a non-deterministic one (atomic sums) is taken only when no
// deterministic one fits the workspace limit. A training run sees one or two
// batch sizes (the last batch of an epoch may be short), so the cache stays small.
//
// With allow_tf32 false only FMA (full fp32) kernels are accepted, so results
// match the CPU within fp32 rounding; with it true TF32 tensor-core kernels are
// allowed (Ampere and later round the products' inputs to 10-bit mantissas).
//
// Ownership and threading: device pointers are the caller's. One instance is
// used by one thread (its layer's); calls queue work on the handle's stream
// and do not synchronise.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/backend/cuda/cudnn_descriptors.h"
#include "core/backend/ops.h"

namespace dtrain {

class CudnnConv {
 public:
  // geom: the input [C,H,W], kernel, stride and padding; filters: F; groups:
  // G (weights [F, C/G, kh, kw]; group g's filters read only its C/G
  // channels). Throws ShapeError for a geometry without output or a G that
  // does not divide C and F.
  CudnnConv(const ops::Window2d& geom, int64_t filters, bool allow_tf32, size_t workspace_limit_bytes,
            int64_t groups = 1);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Workspace bytes the three passes need for a batch of n (the largest of the
  // three); chooses and caches the algorithms for n on first use (host work
  // only: nothing runs on the stream, nothing synchronises). Throws
  // DeviceError when some pass has no algorithm within the workspace limit.
  size_t workspaceBytes(cudnnHandle_t handle, int64_t n);

  // The passes below choose the algorithms for n if workspaceBytes(n) has not,
  // and throw DeviceError when workspace_bytes < workspaceBytes(n). A batch of
  // 0 does nothing; a negative one throws ShapeError.
  // y [n,F,Ho,Wo] = conv(x [n,C,H,W], w [F,C/G,kh,kw]), overwriting y. No bias.
  void forward(cudnnHandle_t handle, const float* x, const float* w, float* y, int64_t n, void* workspace,
               size_t workspace_bytes);
  // dx [n,C,H,W] = the input gradient from dy [n,F,Ho,Wo], overwriting dx.
  void backwardData(cudnnHandle_t handle, const float* w, const float* dy, float* dx, int64_t n,
                    void* workspace, size_t workspace_bytes);
  // dw [F,C/G,kh,kw] += the weight gradient (accumulates).
  void backwardFilter(cudnnHandle_t handle, const float* x, const float* dy, float* dw, int64_t n,
                      void* workspace, size_t workspace_bytes);

  // "fwd IMPLICIT_PRECOMP_GEMM, bwd-data ALGO_1, bwd-filter ALGO_1" for batch n,
  // for logs; a non-deterministic choice is marked, TF32 math too. Says so
  // when nothing was chosen for n yet.
  std::string algorithms(int64_t n) const;
  // How many times algorithms were chosen (once per batch size seen).
  int64_t searches() const { return searches_; }
  // "conv 5x11x11 -> 7x11x11, kernel 3x3, stride 1x1, padding 1x1" (and
  // ", 4 groups" when grouped), for messages.
  const std::string& describe() const { return describe_; }

 private:
  struct Plan;
  Plan& planFor(cudnnHandle_t handle, int64_t n);
  Plan& checkedPlan(cudnnHandle_t handle, int64_t n, size_t workspace_bytes, const char* pass);
  void check(cudnnStatus_t status, const char* what, int64_t n) const;

  ops::Window2d geom_;
  int64_t filters_;
  bool allow_tf32_;
  size_t workspace_limit_;
  std::string describe_;
  CudnnFilterDescriptor filter_;
  CudnnConvolutionDescriptor conv_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
  int64_t searches_ = 0;
};

}  // namespace dtrain
