// Grid-stride loops around the shared element rules; the variant is chosen
// once per call, as the CPU loops do.
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/optimizer_kernels.h"
#include "core/errors.h"
#include "core/optim/update_rules.h"

namespace dtrain::cuda {

namespace {

__global__ void sgdPlainKernel(float* p, const float* g, int64_t n, update_rules::SgdScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = update_rules::sgdPlain(p[i], g[i], s);
}

template <bool kNesterov>
__global__ void sgdMomentumKernel(float* p, const float* g, float* buf, int64_t n,
                                  update_rules::SgdScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], bi = buf[i];
    update_rules::sgdMomentum<kNesterov>(pi, g[i], bi, s);
    p[i] = pi;
    buf[i] = bi;
  }
}

__global__ void adamKernel(float* p, const float* g, float* m, float* v, int64_t n,
                           update_rules::AdamScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], mi = m[i], vi = v[i];
    update_rules::adam(pi, g[i], mi, vi, s);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void sgdUpdate(float* params, const float* grads, float* momentum_buf, int64_t n, double lr, double momentum,
               bool nesterov, double weight_decay, cudaStream_t stream) {
  if (momentum != 0.0 && !momentum_buf)
    throw Error("cuda::sgdUpdate: momentum " + std::to_string(momentum) +
                " needs a momentum buffer, got none (allocate n floats, zeroed)");
  if (n <= 0) return;
  const update_rules::SgdScalars s = update_rules::sgdScalars(lr, momentum, weight_decay);
  const unsigned blocks = gridStrideBlocks(n);
  if (momentum == 0.0)
    sgdPlainKernel<<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, n, s);
  else if (nesterov)
    sgdMomentumKernel<true><<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, momentum_buf, n, s);
  else
    sgdMomentumKernel<false><<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, momentum_buf, n, s);
}

void adamUpdate(float* params, const float* grads, float* m, float* v, int64_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                cudaStream_t stream) {
  if (step < 1) throw Error("cuda::adamUpdate: step must be >= 1, got " + std::to_string(step));
  if (n <= 0) return;
  const update_rules::AdamScalars s =
      update_rules::adamScalars(lr, beta1, beta2, eps, weight_decay, decoupled, step);
  adamKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(params, grads, m, v, n, s);
}

}  // namespace dtrain::cuda
