// A small residual DAG for model tests: input [2,5,5] -> stem -> block 1:
// c1 -> r1 -> c2, add with the block input, relu -> block 2: sum2 = act1 +
// c3(act1), sum3 = sum2 + c4(c3) + p(act1), both of sum2's inputs read by a
// later layer too -> flatten -> dense 4. It exercises a node read by several
// layers, an add of three inputs, a relu fused into the conv2d before it, and
// results read several layers later.
#pragma once
#include <string>
#include <vector>

#include "tests/common/layer_spec.h"

namespace dtrain::testing {

inline LayerSpec dagConv(const std::string& name, const std::string& input, int64_t kernel = 3) {
  return layerSpec(name, "conv2d", {input},
                   {{"filters", int64_t{3}}, {"kernel", kernel}, {"padding", int64_t{kernel / 2}}});
}

inline std::vector<LayerSpec> residualDag() {
  return {dagConv("stem", "input"),
          dagConv("c1", "stem"),
          layerSpec("r1", "relu", {"c1"}),
          dagConv("c2", "r1"),
          layerSpec("sum1", "add", {"c2", "stem"}),
          layerSpec("act1", "relu", {"sum1"}),
          dagConv("c3", "act1"),
          layerSpec("sum2", "add", {"act1", "c3"}),
          dagConv("c4", "c3"),
          dagConv("p", "act1", 1),
          layerSpec("sum3", "add", {"sum2", "c4", "p"}),
          layerSpec("flat", "flatten", {"sum3"}),
          layerSpec("fc", "dense", {"flat"}, {{"units", int64_t{4}}})};
}

}  // namespace dtrain::testing
