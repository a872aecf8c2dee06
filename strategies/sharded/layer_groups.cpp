#include "strategies/sharded/layer_groups.h"

#include <algorithm>

#include "strategies/gradient_buckets.h"

namespace dtrain {

LayerGroups planLayerGroups(const Model& model, const ParamStore& store, int64_t min_bytes) {
  const std::vector<NodeParamStart> starts = nodeParamStarts(model, store);
  const auto& nodes = model.nodes();
  LayerGroups out;
  out.group_of_node.assign(nodes.size(), -1);
  out.tied_group.assign(nodes.size(), -1);
  const int64_t min_floats = std::max<int64_t>(1, min_bytes / 4);
  for (size_t r = 0; r < starts.size();) {
    LayerGroup g;
    g.begin = r == 0 ? 0 : starts[r].begin;  // padding before the first tensor goes with the first group
    g.first_node = starts[r].node;
    size_t next = r + 1;
    auto end_of = [&](size_t k) { return k < starts.size() ? starts[k].begin : store.size(); };
    while (next < starts.size() && end_of(next) - g.begin < min_floats) ++next;
    g.end = end_of(next);
    g.last_node = starts[next - 1].node;
    for (size_t k = r; k < next; ++k)
      out.group_of_node[static_cast<size_t>(starts[k].node)] = static_cast<int>(out.groups.size());
    out.groups.push_back(g);
    r = next;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int tied = model.tiedTo(i);
    if (tied < 0) continue;
    const int g = out.group_of_node[static_cast<size_t>(tied)];
    out.tied_group[i] = g;
    if (g >= 0) out.groups[static_cast<size_t>(g)].pinned = true;
  }
  return out;
}

}  // namespace dtrain
