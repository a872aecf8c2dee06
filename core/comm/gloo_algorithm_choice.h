// Which of Gloo's all-reduce algorithms runs for a message, and building it:
// the algorithm GlooOptions::algorithm names, or under "auto" the one that
// measured fastest for the message's size on the group's size. Internal to
// GlooProcessGroup; no state, thread-safe.
#pragma once
#include <gloo/algorithm.h>
#include <gloo/context.h>

#include <cstdint>
#include <memory>
#include <string>

namespace dtrain {

enum class AllReduceAlgorithm { Ring, RingChunked, HalvingDoubling, Bcube };

// "ring", "ring_chunked", "halving_doubling" or "bcube".
const char* allReduceAlgorithmName(AllReduceAlgorithm algorithm);

// Whether `option` is "auto" or an algorithm's name.
bool isKnownAllReduceOption(const std::string& option);

// "unknown all-reduce algorithm 'x' (known: auto, ring, ...)": the error
// clause for an option that is not known.
std::string unknownAllReduceOptionText(const std::string& option);

// The algorithm a known `option` runs for `bytes` bytes on `size` ranks.
AllReduceAlgorithm chooseAllReduceAlgorithm(const std::string& option, int size, int64_t bytes);

// Builds `algorithm` summing `count` elements at `data` over `context`'s
// ranks. Collective in the sense that it takes the context's next slots: every
// rank must build the same algorithms in the same order.
std::unique_ptr<gloo::Algorithm> makeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, float* data, int count);
std::unique_ptr<gloo::Algorithm> makeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, double* data, int count);

}  // namespace dtrain
