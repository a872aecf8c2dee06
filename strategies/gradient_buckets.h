// Gradient buckets: the flat gradient buffer cut into contiguous ranges of
// whole layers' parameter tensors, in the order backward finishes them (the last
// layers first). Each bucket can be all-reduced as soon as every layer in it
// has finished backward, while backward goes on with earlier layers.
#pragma once
#include <cstdint>
#include <vector>

#include "core/nn/model.h"
#include "core/nn/param_store.h"

namespace dtrain {

struct GradientBucket {
  int64_t begin = 0, end = 0;  // floats, into the flat gradient buffer
  // The earliest model node with parameters in the bucket: backward visits
  // nodes in reverse, so once it is done the whole bucket is final.
  int ready_after_node = 0;
};

// Where each node's parameters start in the flat layout, for the nodes that
// have any, in model order (Model::registerParams registers them node by node).
struct NodeParamStart {
  int node;
  int64_t begin;  // floats
};
std::vector<NodeParamStart> nodeParamStarts(const Model& model, const ParamStore& store);

// Buckets in the order they become ready (highest offsets first). The first
// bucket (the last layers) and the last bucket (the first layers) are held to
// `first_bucket_bytes` (when smaller than `bucket_bytes`): the first so that
// communication starts early, as PyTorch DDP does, the last because backward
// has ended when it is ready and its reduction overlaps nothing. Between them
// a bucket takes layers until the next would push it past `bucket_bytes`. A
// layer larger than a cap is a bucket alone. Empty when the model has no
// parameters.
std::vector<GradientBucket> planGradientBuckets(const Model& model, const ParamStore& store,
                                                int64_t bucket_bytes, int64_t first_bucket_bytes);

}  // namespace dtrain
