// CUDA softmax cross-entropy against the CPU on fresh random logits with odd
// sizes, few and many classes, one block of rows and several: loss within
// 1e-6 relative, dlogits within 1e-5 relative per element, the correct count
// exact (ties go to the first maximum); an out-of-range label is reported and
// its row left out.
#include "core/backend/cuda/loss_kernels.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/ops.h"
#include "core/util/rng.h"
#include "tests/cuda/device_array.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct GpuLoss {
  double loss = 0;
  unsigned long long correct = 0;
  int bad_label = 0;
  std::vector<float> dlogits;
};

GpuLoss runGpu(CachingAllocator& memory, const CudaStream& stream, const std::vector<float>& logits,
               const std::vector<int32_t>& labels, int64_t classes, float grad_scale, bool with_grad) {
  const auto n = static_cast<int64_t>(labels.size());
  DeviceArray<float> d_logits(memory, stream, logits), d_grad(memory, stream, logits.size());
  DeviceArray<int32_t> d_labels(memory, stream, labels);
  DeviceArray<double> loss(memory, stream, size_t(1));
  DeviceArray<unsigned long long> correct(memory, stream, size_t(1));
  DeviceArray<int> bad(memory, stream, size_t(1));
  cuda::softmaxCrossEntropy(d_logits.get(), d_labels.get(), n, classes, grad_scale,
                            with_grad ? d_grad.get() : nullptr, loss.get(), correct.get(), bad.get(),
                            stream.get());
  GpuLoss out;
  out.loss = loss.download()[0];
  out.correct = correct.download()[0];
  out.bad_label = bad.download()[0];
  if (with_grad) out.dlogits = d_grad.download();
  return out;
}

// max over elements of |got - want| / |want| (0 where both are 0).
double worstRelative(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - want[i]);
    if (diff > 0) worst = std::max(worst, diff / std::max(std::fabs(double(want[i])), 1e-30));
  }
  return worst;
}

}  // namespace

TEST_CASE("cuda: softmax cross-entropy equals the CPU (loss 1e-6, dlogits 1e-5 relative, count exact)") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(31);
  struct Size {
    int64_t n, classes;
  };
  // One block (<= 512 rows), several blocks, thousands of classes, one class.
  for (Size s : {Size{37, 10}, Size{1237, 10}, Size{19, 3001}, Size{5, 1}, Size{700, 33}}) {
    CAPTURE(s.n);
    CAPTURE(s.classes);
    std::vector<float> logits(s.n * s.classes);
    for (float& v : logits) v = rng.uniform(-5.0f, 5.0f);
    std::vector<int32_t> labels(s.n);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng.below(s.classes));
    if (s.classes >= 4 && s.n >= 3) {
      // Ties for the maximum, where the first one counts: rows 0 and 2 have
      // the label on the first of two maxima (correct), row 1 on the second
      // (not correct), so a rule that picks the last maximum changes the count.
      for (int64_t r : {0, 2}) {
        float* z = logits.data() + r * s.classes;
        z[1] = z[s.classes - 1] = 9.0f;
        labels[r] = 1;
      }
      float* z1 = logits.data() + s.classes;
      z1[0] = z1[2] = 9.0f;
      labels[1] = 2;
    }
    const float grad_scale = 1.0f / static_cast<float>(s.n);
    std::vector<float> dlogits(logits.size());
    int64_t correct = 0;
    const double loss = ops::softmaxCrossEntropy(logits.data(), labels.data(), s.n, s.classes, grad_scale,
                                                 dlogits.data(), &correct);

    const GpuLoss gpu = runGpu(memory, stream, logits, labels, s.classes, grad_scale, true);
    CHECK(gpu.bad_label == 0);
    CHECK(std::fabs(gpu.loss - loss) <= 1e-6 * std::fabs(loss));
    CHECK(gpu.correct == static_cast<unsigned long long>(correct));
    CHECK(worstRelative(gpu.dlogits, dlogits) < 1e-5);

    const GpuLoss no_grad = runGpu(memory, stream, logits, labels, s.classes, grad_scale, false);
    CHECK(std::fabs(no_grad.loss - loss) <= 1e-6 * std::fabs(loss));
    CHECK(no_grad.correct == static_cast<unsigned long long>(correct));
  }
}

TEST_CASE("cuda: softmax cross-entropy reports an out-of-range label and leaves its row out") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(32);
  const int64_t n = 41, classes = 10;
  std::vector<float> logits(n * classes);
  for (float& v : logits) v = rng.uniform(-5.0f, 5.0f);
  std::vector<int32_t> labels(n);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng.below(classes));
  const GpuLoss clean = runGpu(memory, stream, logits, labels, classes, 1.0f, true);
  CHECK(clean.bad_label == 0);

  for (int32_t bad : {int32_t(classes), int32_t(-1)}) {
    CAPTURE(bad);
    std::vector<int32_t> broken = labels;
    broken[7] = bad;
    // The CPU rejects the batch; its figures over the other rows are what the GPU must give.
    std::vector<int32_t> rest = labels;
    rest.erase(rest.begin() + 7);
    std::vector<float> rest_logits = logits;
    rest_logits.erase(rest_logits.begin() + 7 * classes, rest_logits.begin() + 8 * classes);
    int64_t correct = 0;
    const double loss =
        ops::softmaxCrossEntropy(rest_logits.data(), rest.data(), n - 1, classes, 1.0f, nullptr, &correct);

    const GpuLoss gpu = runGpu(memory, stream, logits, broken, classes, 1.0f, true);
    CHECK(gpu.bad_label == 1);
    CHECK(std::fabs(gpu.loss - loss) <= 1e-6 * std::fabs(loss));
    CHECK(gpu.correct == static_cast<unsigned long long>(correct));
    for (int64_t c = 0; c < classes; ++c) CHECK(gpu.dlogits[7 * classes + c] == 0.0f);
    CHECK(gpu.dlogits[8 * classes + 1] ==
          clean.dlogits[8 * classes + 1]);  // other rows as without the bad label
  }
}
