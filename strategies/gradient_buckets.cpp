#include "strategies/gradient_buckets.h"

#include <algorithm>

namespace dtrain {

std::vector<NodeParamStart> nodeParamStarts(const Model& model, const ParamStore& store) {
  std::vector<NodeParamStart> starts;
  const auto& nodes = model.nodes();
  size_t entry = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const size_t count = nodes[i].layer->paramSpecs().size();
    if (count == 0) continue;
    starts.push_back(NodeParamStart{static_cast<int>(i), store.entries().at(entry).offset});
    entry += count;
  }
  return starts;
}

std::vector<GradientBucket> planGradientBuckets(const Model& model, const ParamStore& store,
                                                int64_t bucket_bytes, int64_t first_bucket_bytes) {
  const std::vector<NodeParamStart> ranges = nodeParamStarts(model, store);

  // Layer r's gradients are [begin(r), end(r)); a bucket holds whole layers:
  // one that took part of a layer would wait for that layer's backward anyway.
  const size_t layers = ranges.size();
  std::vector<GradientBucket> buckets;
  if (layers == 0) return buckets;
  auto begin = [&](size_t r) { return r == 0 ? 0 : ranges[r].begin; };  // padding before the first tensor
  auto end = [&](size_t r) { return r + 1 == layers ? store.size() : ranges[r + 1].begin; };
  const int64_t first_cap = std::max<int64_t>(1, std::min(bucket_bytes, first_bucket_bytes) / 4);
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / 4);

  // The last layers (ready first) and the first layers (ready last, when
  // nothing is left to overlap their reduction with) go in buckets held to the
  // small cap; at least one layer each.
  size_t head = layers;  // layers [head, layers) form the first bucket
  while (head > 0 && (head == layers || end(layers - 1) - begin(head - 1) <= first_cap)) --head;
  size_t tail = 0;  // layers [0, tail) form the last bucket
  while (tail < head && (tail == 0 || end(tail) - begin(0) <= first_cap)) ++tail;

  auto add = [&](size_t first, size_t last) {  // layers [first, last)
    buckets.push_back(GradientBucket{begin(first), end(last - 1), ranges[first].node});
  };
  add(head, layers);
  // The middle, from the back: a bucket takes layers until the next would
  // push it past the cap; a layer larger than that is a bucket alone.
  size_t upper = head;
  for (size_t r = head; r-- > tail;) {
    if (end(upper - 1) - begin(r) > cap && r + 1 < upper) {
      add(r + 1, upper);
      upper = r + 1;
    }
  }
  if (upper > tail) add(tail, upper);
  if (tail > 0) add(0, tail);
  return buckets;
}

}  // namespace dtrain
