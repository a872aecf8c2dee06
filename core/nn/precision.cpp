#include "core/nn/precision.h"

#include "core/errors.h"

namespace dtrain {

Precision precisionNamed(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "tf32") return Precision::Tf32;
  if (name == "bf16") return Precision::Bf16;
  if (name == "fp16") return Precision::Fp16;
  throw ConfigError("[job] precision must be one of \"fp32\", \"tf32\", \"bf16\", \"fp16\" (got \"" + name +
                    "\")");
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Tf32: return "tf32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

PassPrecision passPrecisionOf(SixteenBitRole role, Precision p) {
  if (!isSixteenBit(p)) {
    const bool products = role == SixteenBitRole::Product && p == Precision::Tf32;
    return {products ? "tf32 products (GPU), fp32" : "fp32", "fp32"};
  }
  const std::string h = precisionName(p);
  switch (role) {
    case SixteenBitRole::Product:
      return {h + " x " + h + ", fp32 sums -> " + h, h + " grads, fp32 weight grads"};
    case SixteenBitRole::Normalisation:
      return {h + " in/out, fp32 statistics", h + " grads, fp32 param grads"};
    case SixteenBitRole::Reshape:
      return {h + " (reshape)", h + " (reshape)"};
    case SixteenBitRole::Elementwise:
      break;
  }
  return {"fp32 math on " + h + " -> " + h, "fp32 math -> " + h + " grads"};
}

}  // namespace dtrain
