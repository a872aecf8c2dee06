#include "core/backend/cuda/cudnn_pool.h"

#include <string>

#include "core/errors.h"

namespace dtrain {

namespace {

std::string pair(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

std::string describePool(const ops::Window2d& g, CudnnPool::Mode mode) {
  return std::string(mode == CudnnPool::Mode::Max ? "max" : "average") + " pool " +
         pair(g.kernel_h, g.kernel_w) + ", stride " + pair(g.stride_h, g.stride_w) + ", padding " +
         pair(g.pad_h, g.pad_w) + " over " + std::to_string(g.channels) + "x" + pair(g.height, g.width);
}

// The pooling layers' own rule (pool_config): padding at most half the
// window, so no window sees only padding, where max pooling has no answer.
const ops::Window2d& validated(const ops::Window2d& g, CudnnPool::Mode mode) {
  const bool ok = g.channels > 0 && g.height > 0 && g.width > 0 && g.kernel_h > 0 && g.kernel_w > 0 &&
                  g.stride_h > 0 && g.stride_w > 0 && g.pad_h >= 0 && g.pad_w >= 0 &&
                  2 * g.pad_h <= g.kernel_h && 2 * g.pad_w <= g.kernel_w &&
                  g.height + 2 * g.pad_h >= g.kernel_h && g.width + 2 * g.pad_w >= g.kernel_w;
  if (!ok)
    throw ShapeError("cuDNN: " + describePool(g, mode) +
                     ": needs positive extents, kernel and stride, padding at most half the kernel, and "
                     "a window that fits the padded input");
  return g;
}

}  // namespace

CudnnPool::CudnnPool(const ops::Window2d& geom, Mode mode)
    : geom_(validated(geom, mode)),
      mode_(mode),
      describe_(describePool(geom, mode)),
      pool_(mode == Mode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
            geom.kernel_h, geom.kernel_w, geom.pad_h, geom.pad_w, geom.stride_h, geom.stride_w) {}

void CudnnPool::check(cudnnStatus_t status, const char* what, int64_t n, DType dtype) const {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string data = dtype == DType::F32 ? "" : std::string(", ") + dtypeName(dtype) + " data";
  const std::string where = std::string(what) + " for " + describe_ + ", batch " + std::to_string(n) + data;
  checkCudnn(status, where.c_str());
}

const CudnnPool::Tensors& CudnnPool::tensorsFor(int64_t n, DType dtype) {
  auto found = tensors_.find({n, dtype});
  if (found != tensors_.end()) return found->second;
  if (n < 1)
    throw ShapeError("cuDNN: " + describe_ + ": batch size " + std::to_string(n) + " must be at least 1");
  auto tensor = [&](int64_t h, int64_t w) {
    try {
      return CudnnTensorDescriptor(n, geom_.channels, h, w, cudnnDataTypeOf(dtype));
    } catch (const DeviceError& e) {  // a batch too large for cuDNN's int indexing: say whose
      throw DeviceError(std::string(e.what()) + " (" + describe_ + ", batch " + std::to_string(n) + ")");
    }
  };
  CudnnTensorDescriptor x = tensor(geom_.height, geom_.width);
  CudnnTensorDescriptor y = tensor(geom_.outHeight(), geom_.outWidth());
  // cuDNN must see the output shape the layer allocates.
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(cudnnGetPooling2dForwardOutputDim(pool_.get(), x.get(), &on, &oc, &oh, &ow), "ask the output shape",
        n);
  if (on != n || oc != geom_.channels || oh != geom_.outHeight() || ow != geom_.outWidth())
    throw DeviceError("cuDNN: " + describe_ + ": cuDNN computes an output of " + std::to_string(oc) + "x" +
                      pair(oh, ow) + " where the layer expects " + std::to_string(geom_.channels) + "x" +
                      pair(geom_.outHeight(), geom_.outWidth()));
  return tensors_.emplace(std::make_pair(n, dtype), Tensors(std::move(x), std::move(y))).first->second;
}

void CudnnPool::forward(cudnnHandle_t handle, const float* x, float* y, int64_t n) {
  forward(handle, x, y, DType::F32, n);
}

void CudnnPool::backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy, float* dx,
                         int64_t n) {
  backward(handle, x, y, dy, dx, DType::F32, n);
}

// alpha and beta are floats for every data type here: cuDNN reads them as
// float for float, half and bfloat16 tensors (double only for double ones).
void CudnnPool::forward(cudnnHandle_t handle, const void* x, void* y, DType dtype, int64_t n) {
  if (n == 0) return;
  const Tensors& t = tensorsFor(n, dtype);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnPoolingForward(handle, pool_.get(), &one, t.first.get(), x, &zero, t.second.get(), y),
        "pooling forward", n, dtype);
}

void CudnnPool::backward(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx,
                         DType dtype, int64_t n) {
  if (n == 0) return;
  const Tensors& t = tensorsFor(n, dtype);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnPoolingBackward(handle, pool_.get(), &one, t.second.get(), y, t.second.get(), dy, t.first.get(),
                             x, &zero, t.first.get(), dx),
        "pooling backward", n, dtype);
}

}  // namespace dtrain
