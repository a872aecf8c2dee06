// Byte batches on a real GPU: the loader hands out bytes and augmentation
// draws (or only sample indices, with the training split copied to the
// device), the stager copies them and its kernel makes the float batch, which
// must equal the CPU loader's float batch bit for bit, labels included.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "core/backend/cuda/cuda_batch_stager.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/util/rng.h"
#include "datasets/batch_loader.h"
#include "datasets/byte_images.h"
#include "datasets/sampler.h"
#include "tests/common/bytes_dataset.h"

using namespace dtrain;
using dtrain::testing::BytesDataset;

namespace {

// Stages every batch of an epoch in `form` and compares it with the float loader's.
void compareOnDevice(const Dataset& ds, const Normalisation& norm, int64_t padding, BatchForm form,
                     int64_t batch) {
  AugmentationOptions a;
  a.flip = true;
  a.crop_padding = padding;
  LoaderOptions floats;
  floats.augmentation = Augmentation(a);
  floats.normalisation = norm;
  floats.seed = 3;
  LoaderOptions bytes = floats;
  bytes.form = form;
  const Sampler sampler(ds.size(), 5, true);
  BatchLoader fl(ds, sampler, batch, floats), bl(ds, sampler, batch, bytes);
  fl.start(1);
  bl.start(1);

  const Shape shape = ds.sampleShape();
  CudaContext& ctx = CudaContext::of(0);
  CudaBatchStager stager(ctx, batch * shape.numel(), batch);
  BatchStager::ByteFormat f;
  f.channels = shape[0];
  f.height = shape[1];
  f.width = shape[2];
  f.mean = norm.mean();
  f.std = norm.std();
  if (form == BatchForm::Indices) {
    f.cache = ds.byteImages()->pixels();
    f.cache_samples = ds.size();
  }
  stager.useBytes(f);

  Batch fb, bb;
  int64_t batches = 0;
  while (fl.next(fb)) {
    REQUIRE(bl.next(bb));
    REQUIRE(bb.size == fb.size);
    const BatchStager::Staged staged =
        stager.stageBytes(bb.bytes.pixels, bb.bytes.transforms, bb.labels.data(), bb.size);
    std::vector<float> images(static_cast<size_t>(bb.size * shape.numel()));
    std::vector<int32_t> labels(static_cast<size_t>(bb.size));
    // On the compute stream, which the stager has made wait for the batch.
    checkCuda(cudaMemcpyAsync(images.data(), staged.images, images.size() * sizeof(float),
                              cudaMemcpyDeviceToHost, ctx.stream()),
              "read the staged images");
    checkCuda(cudaMemcpyAsync(labels.data(), staged.labels, labels.size() * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, ctx.stream()),
              "read the staged labels");
    checkCuda(cudaStreamSynchronize(ctx.stream()), "wait for the reads");
    stager.doneWith();
    REQUIRE(std::memcmp(images.data(), fb.images.data(), images.size() * sizeof(float)) == 0);
    CHECK(labels == fb.labels);
    ++batches;
  }
  CHECK(batches == (ds.size() + batch - 1) / batch);
}

}  // namespace

TEST_CASE("cuda: a byte batch made floats on the GPU equals the CPU loader's batch bit for bit") {
  const BytesDataset fashion(300, Shape{1, 28, 28}, 11);
  const BytesDataset cifar(70, Shape{3, 32, 32}, 12);
  const Normalisation fashion_norm({0.2860f}, {0.3530f});
  const Normalisation cifar_norm({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
  for (BatchForm form : {BatchForm::Bytes, BatchForm::Indices}) {
    CAPTURE(static_cast<int>(form));
    compareOnDevice(fashion, fashion_norm, 4, form, 128);  // the last batch partial
    compareOnDevice(cifar, cifar_norm, 4, form, 32);
    compareOnDevice(cifar, Normalisation(), 0, form, 32);
  }
}
