#include "core/comm/gloo_algorithm_choice.h"

#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>

#include <algorithm>
#include <vector>

namespace dtrain {

namespace {

struct NamedAlgorithm {
  const char* name;
  AllReduceAlgorithm algorithm;
};
constexpr NamedAlgorithm kAlgorithms[] = {{"ring", AllReduceAlgorithm::Ring},
                                          {"ring_chunked", AllReduceAlgorithm::RingChunked},
                                          {"halving_doubling", AllReduceAlgorithm::HalvingDoubling},
                                          {"bcube", AllReduceAlgorithm::Bcube}};

// "auto" picks by message size, from medians of 15-21 runs on loopback with
// 2 and 4 ranks as threads on a 2-core machine (each number below is the
// typical value of three sweeps; the machine was shared, so only clear
// differences were used):
// - Small messages: the plain ring wins. Its p - 1 rounds are one message
//   each, and a small message's time is its message count; the chunked ring
//   sends 2p chunks twice, and halving-doubling and bcube add notices. It
//   moves the whole buffer p - 1 times, though, so it is chosen while
//   (p - 1) x bytes stays under 64 KiB: at 2 ranks it led up to 64 KiB
//   (0.19 ms against 0.27 to 0.44 ms), at 4 ranks up to 16 KiB, and at
//   64 KiB on 4 ranks it was already behind bcube (1.0 to 1.4 ms against 0.7 to 1.3).
// - Up to 4 MiB: halving-doubling, which works for any group size; bcube
//   tied with it but needs the size to be a power of its base, and the
//   chunked ring was behind (4 ranks, 256 KiB: 1.3 to 1.6 ms against 3.4 to 8.4).
// - From 4 MiB: the chunked ring, which keeps both directions of every link
//   busy: 4 ranks, 64 MiB: 206 to 225 ms against 232 to 236 (bcube) and
//   248 to 275 (halving-doubling); at 2 ranks all were within noise.
constexpr int64_t kAutoRingWhileMovedBelow = 64 << 10;
constexpr int64_t kAutoChunkedRingFromBytes = 4 << 20;

// Gloo's bcube groups ranks base at a time and gives wrong sums unless the
// group size is a power of the base (a group of 6 with base 2 does). The
// smallest base that fits always exists: the size itself (one step, every
// rank exchanging with every other).
int bcubeBaseFor(int size) {
  for (int base = 2; base < size; ++base) {
    int64_t power = base;
    while (power < size) power *= base;
    if (power == size) return base;
  }
  return std::max(size, 2);
}

template <typename T>
std::unique_ptr<gloo::Algorithm> makeAllReduceOf(const std::shared_ptr<gloo::Context>& context,
                                                 AllReduceAlgorithm algorithm, T* data, int count) {
  const std::vector<T*> ptrs{data};
  switch (algorithm) {
    case AllReduceAlgorithm::Ring:
      return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, count);
    case AllReduceAlgorithm::RingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, count);
    case AllReduceAlgorithm::HalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, count);
    case AllReduceAlgorithm::Bcube:
      // The base is read when the algorithm is built; nothing else uses it.
      context->base = bcubeBaseFor(context->size);
      return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, count);
  }
  return nullptr;
}

}  // namespace

const char* allReduceAlgorithmName(AllReduceAlgorithm algorithm) {
  for (const NamedAlgorithm& n : kAlgorithms)
    if (n.algorithm == algorithm) return n.name;
  return "?";
}

bool isKnownAllReduceOption(const std::string& option) {
  if (option == "auto") return true;
  for (const NamedAlgorithm& n : kAlgorithms)
    if (option == n.name) return true;
  return false;
}

std::string unknownAllReduceOptionText(const std::string& option) {
  std::string known = "auto";
  for (const NamedAlgorithm& n : kAlgorithms) known += std::string(", ") + n.name;
  return "unknown all-reduce algorithm '" + option + "' (known: " + known + ")";
}

AllReduceAlgorithm chooseAllReduceAlgorithm(const std::string& option, int size, int64_t bytes) {
  for (const NamedAlgorithm& n : kAlgorithms)
    if (option == n.name) return n.algorithm;
  if (int64_t(size - 1) * bytes < kAutoRingWhileMovedBelow) return AllReduceAlgorithm::Ring;
  if (bytes < kAutoChunkedRingFromBytes) return AllReduceAlgorithm::HalvingDoubling;
  return AllReduceAlgorithm::RingChunked;
}

std::unique_ptr<gloo::Algorithm> makeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, float* data, int count) {
  return makeAllReduceOf(context, algorithm, data, count);
}

std::unique_ptr<gloo::Algorithm> makeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, double* data, int count) {
  return makeAllReduceOf(context, algorithm, data, count);
}

}  // namespace dtrain
