// The keys timed algorithm choices are kept under: their text is stable (a
// saved file stays readable) and every field that changes which algorithm
// is fastest or allowed changes the key.
#include "core/backend/algorithm_keys.h"

#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

using namespace dtrain;

namespace {

ConvAlgorithmKey cnnConv2() {
  ConvAlgorithmKey k;
  k.pass = ConvPass::BackwardFilter;
  k.batch = 1024;
  k.channels = 32;
  k.height = 14;
  k.width = 14;
  k.filters = 64;
  k.kernel_h = 3;
  k.kernel_w = 3;
  k.pad_h = 1;
  k.pad_w = 1;
  k.deterministic = true;
  return k;
}

GemmAlgorithmKey fc1WeightGradient() {
  GemmAlgorithmKey k;
  k.trans_a = true;
  k.m = 128;
  k.n = 3136;
  k.k = 1024;
  k.lda = 128;
  k.ldb = 3136;
  k.ldc = 3136;
  k.accumulate = true;
  k.align_a = 256;
  k.align_b = 256;
  k.align_c = 64;
  return k;
}

}  // namespace

TEST_CASE("a convolution key spells out the pass, the shapes, the precision and the determinism") {
  CHECK(algorithmKey(cnnConv2()) ==
        "conv bwd-filter n1024 c32x14x14 f64 k3x3 s1x1 p1x1 g1 fp32 deterministic");
  ConvAlgorithmKey k = cnnConv2();
  k.pass = ConvPass::Forward;
  k.tf32 = true;
  k.deterministic = false;
  k.groups = 32;
  CHECK(algorithmKey(k) == "conv fwd n1024 c32x14x14 f64 k3x3 s1x1 p1x1 g32 tf32 any");
  k.pass = ConvPass::BackwardData;
  CHECK(algorithmKey(k).rfind("conv bwd-data ", 0) == 0);
}

TEST_CASE("every convolution field changes the key") {
  const std::vector<std::function<void(ConvAlgorithmKey&)>> changes = {
      [](ConvAlgorithmKey& k) { k.pass = ConvPass::Forward; },
      [](ConvAlgorithmKey& k) { k.pass = ConvPass::BackwardData; },
      [](ConvAlgorithmKey& k) { k.batch = 1023; },
      [](ConvAlgorithmKey& k) { k.channels = 16; },
      [](ConvAlgorithmKey& k) { k.height = 13; },
      [](ConvAlgorithmKey& k) { k.width = 13; },
      [](ConvAlgorithmKey& k) { k.filters = 32; },
      [](ConvAlgorithmKey& k) { k.kernel_h = 1; },
      [](ConvAlgorithmKey& k) { k.kernel_w = 1; },
      [](ConvAlgorithmKey& k) { k.stride_h = 2; },
      [](ConvAlgorithmKey& k) { k.stride_w = 2; },
      [](ConvAlgorithmKey& k) { k.pad_h = 0; },
      [](ConvAlgorithmKey& k) { k.pad_w = 0; },
      [](ConvAlgorithmKey& k) { k.groups = 2; },
      [](ConvAlgorithmKey& k) { k.tf32 = true; },
      [](ConvAlgorithmKey& k) { k.deterministic = false; },
      [](ConvAlgorithmKey& k) { k.data = DType::BF16; },
      [](ConvAlgorithmKey& k) { k.channels_last = true; },
      // Fields that could run together in the text: 1x11 and 11x1 must differ.
      [](ConvAlgorithmKey& k) {
        k.height = 1;
        k.width = 114;
      },
      [](ConvAlgorithmKey& k) {
        k.height = 11;
        k.width = 4;
      },
  };
  std::set<std::string> keys{algorithmKey(cnnConv2())};
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    ConvAlgorithmKey k = cnnConv2();
    changes[i](k);
    CHECK(keys.insert(algorithmKey(k)).second);
  }
}

TEST_CASE("a product key spells out the transposes, sizes, leading dimensions, accumulation and alignment") {
  CHECK(algorithmKey(fc1WeightGradient()) ==
        "gemm tn m128 n3136 k1024 ld128/3136/3136 accumulate align256/256/64 fp32");
  const std::vector<std::function<void(GemmAlgorithmKey&)>> changes = {
      [](GemmAlgorithmKey& k) { k.trans_a = false; },
      [](GemmAlgorithmKey& k) { k.trans_b = true; },
      [](GemmAlgorithmKey& k) { k.m = 10; },
      [](GemmAlgorithmKey& k) { k.n = 128; },
      [](GemmAlgorithmKey& k) { k.k = 512; },
      [](GemmAlgorithmKey& k) { k.lda = 130; },
      [](GemmAlgorithmKey& k) { k.ldb = 3200; },
      [](GemmAlgorithmKey& k) { k.ldc = 3200; },
      [](GemmAlgorithmKey& k) { k.accumulate = false; },
      [](GemmAlgorithmKey& k) { k.align_a = 8; },
      [](GemmAlgorithmKey& k) { k.align_b = 8; },
      [](GemmAlgorithmKey& k) { k.align_c = 8; },
      [](GemmAlgorithmKey& k) { k.tf32 = true; },
      [](GemmAlgorithmKey& k) { k.inputs = k.output = DType::BF16; },
      [](GemmAlgorithmKey& k) { k.inputs = DType::BF16; },  // fp32 output
      [](GemmAlgorithmKey& k) { k.inputs = k.output = DType::F16; },
  };
  std::set<std::string> keys{algorithmKey(fc1WeightGradient())};
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    GemmAlgorithmKey k = fc1WeightGradient();
    changes[i](k);
    CHECK(keys.insert(algorithmKey(k)).second);
  }
}

TEST_CASE("a pointer's alignment is the largest power of two dividing it, at most 256") {
  alignas(512) static char buffer[1024];
  CHECK(pointerAlignment(buffer) == 256);
  CHECK(pointerAlignment(buffer + 512) == 256);
  CHECK(pointerAlignment(buffer + 64) == 64);
  CHECK(pointerAlignment(buffer + 40) == 8);  // 10 floats in: a row of a 10-unit layer's output
  CHECK(pointerAlignment(buffer + 4) == 4);
  CHECK(pointerAlignment(buffer + 3) == 1);
}

TEST_CASE("a batch_norm key spells out the batch, channels, plane, activation and residual") {
  BatchNormAlgorithmKey k;
  k.batch = 128;
  k.channels = 16;
  k.plane = 1024;
  k.activation = "relu";
  k.residual = true;
  CHECK(algorithmKey(k) == "batchnorm n128 c16 p1024 relu residual");
  BatchNormAlgorithmKey sixteen = k;
  sixteen.data = DType::BF16;  // fp32's text stays as it was; 16-bit names its format
  CHECK(algorithmKey(sixteen) == "batchnorm n128 c16 p1024 relu residual bf16");
  const std::vector<std::function<void(BatchNormAlgorithmKey&)>> changes = {
      [](BatchNormAlgorithmKey& b) { b.batch = 64; },
      [](BatchNormAlgorithmKey& b) { b.channels = 32; },
      [](BatchNormAlgorithmKey& b) { b.plane = 256; },
      [](BatchNormAlgorithmKey& b) { b.activation = "relu6"; },
      [](BatchNormAlgorithmKey& b) { b.activation = "none"; },
      [](BatchNormAlgorithmKey& b) { b.residual = false; },
      [](BatchNormAlgorithmKey& b) { b.data = DType::BF16; },
      // Fields that could run together: c1 p61 and c16 p1 must differ.
      [](BatchNormAlgorithmKey& b) {
        b.channels = 1;
        b.plane = 61;
      },
      [](BatchNormAlgorithmKey& b) {
        b.channels = 16;
        b.plane = 1;
      },
  };
  std::set<std::string> keys{algorithmKey(k)};
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    BatchNormAlgorithmKey changed = k;
    changes[i](changed);
    CHECK(keys.insert(algorithmKey(changed)).second);
  }
}

TEST_CASE("a batch_norm path has a name for algorithmName and a number for the cache") {
  CHECK(std::string(batchNormPathName(BatchNormPath::Cudnn)) == "cudnn");
  CHECK(std::string(batchNormPathName(BatchNormPath::Own)) == "own");
  // The numbers are in saved files: they must not change.
  CHECK(static_cast<int>(BatchNormPath::Cudnn) == 0);
  CHECK(static_cast<int>(BatchNormPath::Own) == 1);
}

TEST_CASE("16-bit data is named in the key, and an fp32 choice is never a 16-bit one's") {
  ConvAlgorithmKey conv = cnnConv2();
  const std::string fp32 = algorithmKey(conv);
  conv.data = DType::BF16;
  CHECK(algorithmKey(conv) == "conv bwd-filter n1024 c32x14x14 f64 k3x3 s1x1 p1x1 g1 bf16 deterministic");
  conv.channels_last = true;
  CHECK(algorithmKey(conv) == "conv bwd-filter n1024 c32x14x14 f64 k3x3 s1x1 p1x1 g1 bf16 deterministic nhwc");
  conv.channels_last = false;
  conv.data = DType::F16;
  CHECK(algorithmKey(conv).find(" fp16 ") != std::string::npos);
  CHECK(algorithmKey(conv) != fp32);

  GemmAlgorithmKey gemm = fc1WeightGradient();
  const std::string gemm_fp32 = algorithmKey(gemm);
  gemm.inputs = DType::BF16;
  gemm.output = DType::F32;  // a dense layer's weight gradient: 16-bit factors, fp32 sums kept
  CHECK(algorithmKey(gemm) == "gemm tn m128 n3136 k1024 ld128/3136/3136 accumulate align256/256/64 bf16 out-fp32");
  gemm.output = DType::BF16;
  CHECK(algorithmKey(gemm).substr(algorithmKey(gemm).size() - 5) == " bf16");
  gemm.inputs = gemm.output = DType::F16;
  CHECK(algorithmKey(gemm) != gemm_fp32);
}
