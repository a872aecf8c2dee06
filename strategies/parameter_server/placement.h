// Which parameter-server shard holds which part of the flat parameter buffer.
//
// Placement is by size, not round-robin: round-robin over variables (what
// TensorFlow's ParameterServerStrategy does by default) left one of 4 servers
// with 94 MB of traffic and another with 0.7 KB, because a model's bytes sit in
// a few large tensors. Here the store's tensors are bin-packed by bytes, and a
// tensor larger than a chunk is cut into pieces that are packed like the rest,
// so no single tensor can pin its whole size on one shard.
//
// Scalars (the step counter, the learning rate) are not variables here: they
// are not in the ParamStore, and the chief keeps them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/nn/param_store.h"

namespace dtrain {

// A contiguous range of the flat parameter buffer (ParamStore layout) held by one shard.
struct PlacedRange {
  int shard = 0;
  int64_t begin = 0, end = 0;  // floats, in the flat buffer
  std::string
      variable;  // the ParamStore entry's name ("conv1.weight"); a split tensor appears once per piece
};

struct ShardPlacement {
  int shards = 0;
  // Every float of the buffer (the 16-float alignment padding after a tensor
  // included, so a shard's buffer is a plain copy of its ranges) in exactly one
  // range, sorted by begin.
  std::vector<PlacedRange> ranges;
  std::vector<int64_t> shard_floats;  // per shard, padding included: what the shard stores and sends
  // The ranges of one shard in flat order; a shard's own buffer is their concatenation in this order.
  std::vector<PlacedRange> rangesOf(int shard) const;
};

// The largest chunk: 4 MiB of floats.
constexpr int64_t kMaxChunkFloats = int64_t(1) << 20;

// The chunk placeVariables(store, shards) uses: at most `max_chunk_floats`, and
// at most a quarter of a shard's mean share, rounded up to 16 floats.
//
// Why a quarter of the mean: greedy packing (largest first onto the least
// loaded shard) never leaves a shard more than one item above the mean, so
// with every item at most mean/4 no shard exceeds 1.25x the mean (plus the
// rounding). A fixed 4 MiB chunk is not enough: the mlp preset has 535,818
// parameters, three quarters of them in fc1.weight, which a 4 MiB chunk does not
// split, so 2 shards would be 1.5x the mean.
// Why 16 floats: piece boundaries stay on ParamStore's 16-float alignment.
int64_t chunkFloatsFor(int64_t total_floats, int shards, int64_t max_chunk_floats = kMaxChunkFloats);

// Bin-packs the store's entries over `shards` by size: largest first onto the
// least loaded shard, ties to the lower shard (equal sizes: the lower offset
// first). An entry larger than `chunk_floats` is split into ceil(n / chunk)
// pieces of nearly equal size (at most `chunk_floats`, boundaries on 16 floats
// when the chunk is a multiple of 16), packed like the rest. An entry's size
// includes its alignment padding.
//
// Afterwards, neighbouring ranges are merged only when they are on the same
// shard, adjacent in the flat buffer and of the same variable (pieces of one
// tensor that landed together); different variables always stay separate
// rows, so the table names every variable.
//
// Deterministic: every process computes the same placement from the same
// store. Throws ConfigError for shards < 1 or chunk_floats < 1.
ShardPlacement placeVariables(const ParamStore& store, int shards, int64_t chunk_floats);
// With the chunk of chunkFloatsFor(store.size(), shards): the strategy's placement.
ShardPlacement placeVariables(const ParamStore& store, int shards);

// The largest shard's floats over the mean (1.0 = perfectly even; 0 for an empty buffer).
double largestShareOverMean(const ShardPlacement& placement);

// The table for the start-up line and `dtrain check`: a header line (shards,
// total, largest over mean), one line per shard (shard, bytes, share of the
// total, variables (pieces); "empty" for a shard with nothing) and, with
// `per_variable`, one line per range; human-readable byte sizes.
std::vector<std::string> describePlacement(const ShardPlacement& placement, bool per_variable);

}  // namespace dtrain
