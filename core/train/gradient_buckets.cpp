#include "core/train/gradient_buckets.h"

#include <algorithm>

namespace dtrain {

std::vector<GradientBucket> planGradientBuckets(const Model& model, const ParamStore& store,
                                                int64_t bucket_bytes, int64_t first_bucket_bytes) {
  // Entries are registered node by node in model order (Model::registerParams);
  // find where each node's tensors start.
  struct NodeRange {
    int node;
    int64_t begin;
  };
  std::vector<NodeRange> ranges;
  const auto& nodes = model.nodes();
  size_t entry = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t count = nodes[i].layer->paramSpecs().size();
    if (count == 0) continue;
    ranges.push_back(NodeRange{static_cast<int>(i), store.entries().at(entry).offset});
    entry += count;
  }

  // Whole layers, from the last: a bucket that took part of a layer would
  // wait for that layer's backward anyway.
  std::vector<GradientBucket> buckets;
  int64_t cap_floats = std::max<int64_t>(1, std::min(bucket_bytes, first_bucket_bytes) / 4);
  int64_t end = store.size();
  for (size_t r = ranges.size(); r-- > 0;) {
    int64_t begin = r == 0 ? 0 : ranges[r].begin;  // padding before the first tensor, if any
    if (!buckets.empty() && buckets.back().end - begin <= cap_floats) {
      buckets.back().begin = begin;  // the layer joins the open bucket
    } else {
      if (!buckets.empty()) cap_floats = std::max<int64_t>(1, bucket_bytes / 4);
      buckets.push_back(GradientBucket{begin, end, 0});
    }
    buckets.back().ready_after_node = ranges[r].node;
    end = begin;
  }
  return buckets;
}

}  // namespace dtrain
