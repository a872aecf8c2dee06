// The groups a stage-3 sharded run gathers its parameters in: the parameter
// ranges of consecutive layers of the flat layout, in forward order, each
// taking layers until it holds at least `min_bytes` (a larger layer is a
// group alone), tiling [0, n). A group is gathered whole before the first of
// its layers runs (forward or backward) and released after the last, and
// its gradients are reduce-scattered as one bucket.
#pragma once
#include <cstdint>
#include <vector>

#include "core/nn/model.h"
#include "core/nn/param_store.h"

namespace dtrain {

struct LayerGroup {
  int64_t begin = 0, end = 0;         // floats of the flat layout
  int first_node = 0, last_node = 0;  // the lowest and highest node with parameters in it
  // A node outside the group reads its parameters (a tied weight: a GPT's
  // output layer reads the token embedding's table): it is gathered at the
  // start of each forward pass and kept until its backward pass has ended.
  bool pinned = false;
};

struct LayerGroups {
  std::vector<LayerGroup> groups;
  std::vector<int> group_of_node;  // per node: the group holding its parameters, or -1
  std::vector<int> tied_group;     // per node: the group of the weight it borrows, or -1
};

LayerGroups planLayerGroups(const Model& model, const ParamStore& store, int64_t min_bytes);

}  // namespace dtrain
