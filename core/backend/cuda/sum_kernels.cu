// The sums of sum_kernels.h: grid-stride loops, one pass over all the inputs
// (a copy followed by accumulations would read and write the output again
// for each input).
#include <string>

#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/sum_kernels.h"
#include "core/backend/fused_activation.h"
#include "core/errors.h"

namespace dtrain::cuda {

namespace {

using ops::FusedActivation;

// The inputs of one pass, passed by value (kernel parameter memory), so a
// call needs no device array of pointers.
template <typename T>
struct SumInputs {
  const T* x[kSumInputsPerPass];
  int count;
};

// y[i] = act(s) with s = partial[i] (when given) or x[0][i], plus the
// remaining inputs in order. Out is float for a pass that hands its sum on
// (no rounding between passes), T for the last.
template <typename T, typename Out, FusedActivation A>
__global__ void sumManyKernel(SumInputs<T> in, const float* partial, Out* y, int64_t n) {
  const int first = partial ? 0 : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float s = partial ? partial[i] : toFloat(in.x[0][i]);
    for (int k = first; k < in.count; ++k) s += toFloat(in.x[k][i]);
    y[i] = fromFloat<Out>(ops::activate<A>(s));
  }
}

}  // namespace

void sumOf(const void* const* x, int count, DType dtype, void* y, int64_t n, bool relu, float* partial,
           cudaStream_t stream) {
  if (n <= 0 || count <= 0) return;
  if (count > kSumInputsPerPass && !partial)
    throw Error("sumOf: " + std::to_string(count) + " inputs need the caller's partial-sum buffer");
  const unsigned blocks = gridStrideBlocks(n);
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    const float* carried = nullptr;  // the running sum of the passes so far
    for (int next = 0;;) {
      SumInputs<T> in{};
      in.count = count - next < kSumInputsPerPass ? count - next : kSumInputsPerPass;
      for (int k = 0; k < in.count; ++k) in.x[k] = static_cast<const T*>(x[next + k]);
      next += in.count;
      if (next < count) {  // more inputs follow: hand the float sum on, unrounded
        sumManyKernel<T, float, FusedActivation::None>
            <<<blocks, kElementwiseThreads, 0, stream>>>(in, carried, partial, n);
        carried = partial;
        continue;
      }
      ops::withActivation(relu ? FusedActivation::Relu : FusedActivation::None, [&](auto act) {
        sumManyKernel<T, T, decltype(act)::value>
            <<<blocks, kElementwiseThreads, 0, stream>>>(in, carried, static_cast<T*>(y), n);
      });
      return;
    }
  });
}

}  // namespace dtrain::cuda
