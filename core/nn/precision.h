// The arithmetic a model computes in ([job] precision), and what each layer
// does in it.
//
// "fp32" and "tf32" store every value in 32 bits (tf32 lets a GPU's tensor
// cores round the inputs of matrix products to 10 mantissa bits). "bf16" and
// "fp16" are mixed precision: activations and their gradients are stored in
// 16 bits between layers, matrix products and convolutions multiply 16-bit
// weights and inputs with fp32 sums, and everything the optimizer sees
// (master weights, their gradients, its state) and every reduction
// (batch-norm statistics, the loss, gradient norms) stays fp32.
//
// On the CPU the 16-bit formats run as a reference path: the fp32 kernels on
// values rounded to the format at the points where a 16-bit path stores them
// (Model rounds them; core/backend/ops.h's roundTo16Bits). On a GPU the
// layers read and write 16-bit tensors (DType::BF16 / F16) and store the same
// rounded values, with two differences the GPU's libraries impose: a product
// layer's bias and fused relu are applied to its 16-bit-stored product (one
// more rounding), and cuDNN writes a convolution's weight gradient in the
// data's format before it is added to the fp32 gradient.
#pragma once
#include <cstdint>
#include <string>

#include "core/backend/ops.h"

namespace dtrain {

enum class Precision : uint8_t { Fp32, Tf32, Bf16, Fp16 };

// "fp32" | "tf32" | "bf16" | "fp16"; throws ConfigError otherwise.
Precision precisionNamed(const std::string& name);
const char* precisionName(Precision p);
// bf16 and fp16: values are stored in 16 bits between layers.
inline bool isSixteenBit(Precision p) { return p == Precision::Bf16 || p == Precision::Fp16; }
// The 16-bit format of a 16-bit precision.
inline ops::HalfFormat halfFormatOf(Precision p) {
  return p == Precision::Fp16 ? ops::HalfFormat::Fp16 : ops::HalfFormat::Bf16;
}

// What a layer computes between its 16-bit inputs and outputs in a 16-bit
// precision (Layer::sixteenBitRole).
enum class SixteenBitRole : uint8_t {
  // fp32 arithmetic on the 16-bit values (activations, pooling, dropout, sums).
  Elementwise,
  // A matrix product or convolution: its weights (and bias) rounded to 16
  // bits once per pass from the fp32 masters, products summed in fp32; its
  // weight gradients are fp32 sums of 16-bit factors.
  Product,
  // Batch normalisation: fp32 statistics, scale and shift, fp32 gradients of
  // those.
  Normalisation,
  // No arithmetic (flatten: the same values under another shape).
  Reshape,
};

// The precision of a layer's two passes, for `dtrain check`'s model summary:
// "bf16 x bf16, fp32 sums" / "bf16 grads, fp32 weight grads".
struct PassPrecision {
  std::string forward, backward;
};
PassPrecision passPrecisionOf(SixteenBitRole role, Precision p);

}  // namespace dtrain
