// A conv2d configuration in one call, for the tests that try many geometries.
#pragma once
#include <cstdint>

#include "core/nn/layers/conv2d.h"

namespace dtrain::testing {

inline Conv2dConfig convConfig(int64_t filters, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                               int64_t pw, ConvAlgo algo = ConvAlgo::Auto, bool bias = true) {
  Conv2dConfig c;
  c.filters = filters;
  c.kernel_h = kh;
  c.kernel_w = kw;
  c.stride_h = sh;
  c.stride_w = sw;
  c.pad_h = ph;
  c.pad_w = pw;
  c.algo = algo;
  c.bias = bias;
  return c;
}

}  // namespace dtrain::testing
