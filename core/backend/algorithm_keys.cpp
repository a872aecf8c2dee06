#include "core/backend/algorithm_keys.h"

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain {

static_assert(DType{} == DType::F32, "a key's default element type (algorithm_keys.h) must be F32");

namespace {

std::string pair(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// The names [job] precision uses, not dtypeName's: "fp32", "bf16", "fp16".
const char* typeText(DType t) {
  switch (t) {
    case DType::F32:
      return "fp32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "fp16";
  }
  return "?";
}

// fp32 data says whether TF32 is allowed (the text every fp32 key has always
// had); 16-bit data names its format, TF32 not applying to it.
std::string precisionText(DType data, bool tf32) {
  return data == DType::F32 ? (tf32 ? "tf32" : "fp32") : typeText(data);
}

}  // namespace

const char* convPassName(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward:
      return "fwd";
    case ConvPass::BackwardData:
      return "bwd-data";
    case ConvPass::BackwardFilter:
      return "bwd-filter";
  }
  return "?";
}

std::string algorithmKey(const ConvAlgorithmKey& k) {
  return std::string("conv ") + convPassName(k.pass) + " n" + std::to_string(k.batch) + " c" +
         std::to_string(k.channels) + "x" + pair(k.height, k.width) + " f" + std::to_string(k.filters) +
         " k" + pair(k.kernel_h, k.kernel_w) + " s" + pair(k.stride_h, k.stride_w) + " p" +
         pair(k.pad_h, k.pad_w) + " g" + std::to_string(k.groups) + " " + precisionText(k.data, k.tf32) +
         (k.deterministic ? " deterministic" : " any") + (k.channels_last ? " nhwc" : "");
}

std::string algorithmKey(const GemmAlgorithmKey& k) {
  return std::string("gemm ") + (k.trans_a ? "t" : "n") + (k.trans_b ? "t" : "n") + " m" +
         std::to_string(k.m) + " n" + std::to_string(k.n) + " k" + std::to_string(k.k) + " ld" +
         std::to_string(k.lda) + "/" + std::to_string(k.ldb) + "/" + std::to_string(k.ldc) +
         (k.accumulate ? " accumulate" : " overwrite") + " align" + std::to_string(k.align_a) + "/" +
         std::to_string(k.align_b) + "/" + std::to_string(k.align_c) + " " + precisionText(k.inputs, k.tf32) +
         (k.output != k.inputs ? std::string(" out-") + typeText(k.output) : std::string());
}

std::string algorithmKey(const BatchNormAlgorithmKey& k) {
  return "batchnorm n" + std::to_string(k.batch) + " c" + std::to_string(k.channels) + " p" +
         std::to_string(k.plane) + " " + k.activation + (k.residual ? " residual" : " plain") +
         (k.data == DType::F32 ? std::string() : std::string(" ") + typeText(k.data));
}

const char* batchNormPathName(BatchNormPath path) { return path == BatchNormPath::Cudnn ? "cudnn" : "own"; }

int64_t pointerAlignment(const void* address) {
  const auto bits = reinterpret_cast<uintptr_t>(address);
  int64_t align = 1;
  while (align < 256 && (bits & static_cast<uintptr_t>(align)) == 0) align *= 2;
  return align;
}

}  // namespace dtrain
