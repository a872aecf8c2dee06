#include "core/backend/algorithm_keys.h"

#include <cstdint>

namespace dtrain {

namespace {

std::string pair(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

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
         pair(k.pad_h, k.pad_w) + " g" + std::to_string(k.groups) + (k.tf32 ? " tf32" : " fp32") +
         (k.deterministic ? " deterministic" : " any");
}

std::string algorithmKey(const GemmAlgorithmKey& k) {
  return std::string("gemm ") + (k.trans_a ? "t" : "n") + (k.trans_b ? "t" : "n") + " m" +
         std::to_string(k.m) + " n" + std::to_string(k.n) + " k" + std::to_string(k.k) + " ld" +
         std::to_string(k.lda) + "/" + std::to_string(k.ldb) + "/" + std::to_string(k.ldc) +
         (k.accumulate ? " accumulate" : " overwrite") + " align" + std::to_string(k.align_a) + "/" +
         std::to_string(k.align_b) + "/" + std::to_string(k.align_c) + (k.tf32 ? " tf32" : " fp32");
}

std::string algorithmKey(const BatchNormAlgorithmKey& k) {
  return "batchnorm n" + std::to_string(k.batch) + " c" + std::to_string(k.channels) + " p" +
         std::to_string(k.plane) + " " + k.activation + (k.residual ? " residual" : " plain");
}

const char* batchNormPathName(BatchNormPath path) { return path == BatchNormPath::Cudnn ? "cudnn" : "own"; }

int64_t pointerAlignment(const void* address) {
  const auto bits = reinterpret_cast<uintptr_t>(address);
  int64_t align = 1;
  while (align < 256 && (bits & static_cast<uintptr_t>(align)) == 0) align *= 2;
  return align;
}

}  // namespace dtrain
