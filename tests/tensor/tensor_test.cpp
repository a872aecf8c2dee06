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
