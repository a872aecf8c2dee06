#include <doctest/doctest.h>

#include "core/errors.h"
#include "core/tensor/tensor.h"

using namespace dtrain;

TEST_CASE("tensor narrow and reshape share memory") {
  Tensor t = Tensor::zeros(Shape{4, 3});
  Tensor rows = t.narrow(1, 2);
  CHECK(rows.shape() == Shape{2, 3});
  rows.fill(2.0f);
  CHECK(t.data()[2] == 0.0f);
  CHECK(t.data()[3] == 2.0f);
  CHECK(t.data()[8] == 2.0f);
  CHECK(t.data()[9] == 0.0f);
  Tensor flat = t.reshape(Shape{12});
  CHECK(flat.data() == t.data());
  CHECK_THROWS_AS(t.reshape(Shape{5}), ShapeError);
  CHECK_THROWS_AS(t.narrow(3, 2), ShapeError);
}

TEST_CASE("16-bit tensors: element size in narrowing and copies, fills and sums rounded, no float access") {
  Tensor t = Tensor::zeros(Shape{4, 3}, Device::cpu(), DType::BF16);
  CHECK(t.bytes() == 24);
  CHECK_THROWS_AS(t.data(), ShapeError);
  Tensor rows = t.narrow(1, 2);
  CHECK(static_cast<const char*>(rows.raw()) - static_cast<const char*>(t.raw()) == 6);
  rows.fill(1.0f + 1.0f / 256 + 1.0f / 1024);  // 0.625 of a unit above 1: rounds up to 1 + 2^-7
  Tensor sum = Tensor::zeros(Shape{4, 3}, Device::cpu(), DType::BF16);
  sum.copyFrom(t);
  sum.add(t);
  const auto* bits = static_cast<const uint16_t*>(sum.raw());
  CHECK(bits[0] == 0);           // untouched rows stay zero
  CHECK(bits[3] == 0x4001);      // 2 * (1 + 2^-7) = 2 + 2^-6, exactly a bf16
  CHECK(bits[9] == 0);
  CHECK_THROWS_AS(sum.copyFrom(Tensor::zeros(Shape{4, 3})), ShapeError);  // dtypes must match
  CHECK_THROWS_AS(sum.add(Tensor::zeros(Shape{4, 3})), ShapeError);
  CHECK(Tensor::zeros(Shape{2}, Device::cpu(), DType::F16).to(Device::cpu()).dtype() == DType::F16);
}
