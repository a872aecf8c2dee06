// Grid-stride loops around the shared element rules; the variant is chosen
// once per call, as the CPU loops do. Each kernel takes its step scalars from
// a source: by value (the call's), or from device memory (a recorded step's,
// rewritten by the host before each replay); the loops are the same code.
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/optimizer_kernels.h"
#include "core/errors.h"
#include "core/optim/update_rules.h"

namespace dtrain::cuda {

namespace {

template <typename Scalars>
struct ByValue {
  Scalars s;
  __device__ Scalars get() const { return s; }
};

// What the host wrote into StepScalars::optimizer; every thread reads the
// same few bytes, which the cache broadcasts.
template <typename Scalars>
struct FromDevice {
  const StepScalars* step;
  __device__ Scalars get() const { return *reinterpret_cast<const Scalars*>(step->optimizer); }
};

// Where an update stores its 16-bit copy of each new parameter: nowhere, or
// rounded into an array of T.
struct NoCopy {
  __device__ void store(int64_t, float) const {}
};
template <typename T>
struct CopyTo {
  T* out;
  __device__ void store(int64_t i, float p) const { out[i] = fromFloat<T>(p); }
};

template <typename Source, typename Copy>
__global__ void sgdPlainKernel(float* p, const float* g, int64_t n, Source source, Copy copy) {
  const update_rules::SgdScalars s = source.get();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float pi = update_rules::sgdPlain(p[i], g[i], s);
    p[i] = pi;
    copy.store(i, pi);
  }
}

template <bool kNesterov, typename Source, typename Copy>
__global__ void sgdMomentumKernel(float* p, const float* g, float* buf, int64_t n, Source source, Copy copy) {
  const update_rules::SgdScalars s = source.get();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], bi = buf[i];
    update_rules::sgdMomentum<kNesterov>(pi, g[i], bi, s);
    p[i] = pi;
    buf[i] = bi;
    copy.store(i, pi);
  }
}

template <typename Source, typename Copy>
__global__ void adamKernel(float* p, const float* g, float* m, float* v, int64_t n, Source source, Copy copy) {
  const update_rules::AdamScalars s = source.get();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], mi = m[i], vi = v[i];
    update_rules::adam(pi, g[i], mi, vi, s);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    copy.store(i, pi);
  }
}

// Calls f(copy) with the HalfCopy's store policy.
template <typename F>
void withCopy(const HalfCopy& half, F&& f) {
  if (!half.data) {
    f(NoCopy{});
    return;
  }
  withElementType(half.dtype, [&](auto e) {
    using T = decltype(e);
    f(CopyTo<T>{static_cast<T*>(half.data)});
  });
}

template <typename Source>
void launchSgd(float* params, const float* grads, float* momentum_buf, int64_t n, bool momentum,
               bool nesterov, Source source, cudaStream_t stream, const HalfCopy& half) {
  if (momentum && !momentum_buf)
    throw Error("cuda::sgdUpdate: momentum needs a momentum buffer, got none (allocate n floats, zeroed)");
  if (n <= 0) return;
  const unsigned blocks = gridStrideBlocks(n);
  withCopy(half, [&](auto copy) {
    if (!momentum)
      sgdPlainKernel<<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, n, source, copy);
    else if (nesterov)
      sgdMomentumKernel<true>
          <<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, momentum_buf, n, source, copy);
    else
      sgdMomentumKernel<false>
          <<<blocks, kElementwiseThreads, 0, stream>>>(params, grads, momentum_buf, n, source, copy);
  });
}

template <typename Source>
void launchAdam(float* params, const float* grads, float* m, float* v, int64_t n, Source source,
                cudaStream_t stream, const HalfCopy& half) {
  if (n <= 0) return;
  withCopy(half, [&](auto copy) {
    adamKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(params, grads, m, v, n, source, copy);
  });
}

}  // namespace

void sgdUpdate(float* params, const float* grads, float* momentum_buf, int64_t n, double lr, double momentum,
               bool nesterov, double weight_decay, cudaStream_t stream, const HalfCopy& half) {
  launchSgd(params, grads, momentum_buf, n, momentum != 0.0, nesterov,
            ByValue<update_rules::SgdScalars>{update_rules::sgdScalars(lr, momentum, weight_decay)}, stream,
            half);
}

void adamUpdate(float* params, const float* grads, float* m, float* v, int64_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                cudaStream_t stream, const HalfCopy& half) {
  if (step < 1) throw Error("cuda::adamUpdate: step must be >= 1, got " + std::to_string(step));
  const ByValue<update_rules::AdamScalars> source{
      update_rules::adamScalars(lr, beta1, beta2, eps, weight_decay, decoupled, step)};
  launchAdam(params, grads, m, v, n, source, stream, half);
}

void sgdUpdateFromDevice(float* params, const float* grads, float* momentum_buf, int64_t n, bool momentum,
                         bool nesterov, const StepScalars* scalars, cudaStream_t stream, const HalfCopy& half) {
  launchSgd(params, grads, momentum_buf, n, momentum, nesterov, FromDevice<update_rules::SgdScalars>{scalars},
            stream, half);
}

void adamUpdateFromDevice(float* params, const float* grads, float* m, float* v, int64_t n,
                          const StepScalars* scalars, cudaStream_t stream, const HalfCopy& half) {
  launchAdam(params, grads, m, v, n, FromDevice<update_rules::AdamScalars>{scalars}, stream, half);
}

}  // namespace dtrain::cuda
