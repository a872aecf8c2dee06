// AllToAllExchange: every rank of a Gloo context sends one 64-bit value to
// every other rank and receives theirs, over buffers registered once. The
// algorithm cache uses it to agree which kept algorithm every rank holds.
//
// Peers are waited on in rank order, so a timeout is on the first rank that
// did not take part, and waitingFor() names it. Two sets of buffers take
// turns, so a rank that starts its next exchange early never overwrites a
// value a slower peer has yet to read.
//
// Construction takes two of the context's slots: every rank constructs its
// exchange at the same point. Threading: one thread at a time.
#pragma once
#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace dtrain {

class AllToAllExchange {
 public:
  explicit AllToAllExchange(gloo::Context& context);

  // Collective: every rank's value, by rank. Throws what Gloo throws when a
  // peer fails or does not answer within the context's timeout.
  std::vector<int64_t> run(int64_t mine);

  // The rank run() is waiting for; after a failed run, the rank it waited for
  // then (so an error names the rank itself rather than guessing from which
  // connections look broken afterwards); -1 once all have answered.
  int waitingFor() const { return waiting_for_; }

 private:
  struct Round {
    int64_t mine = 0;
    std::vector<int64_t> received;
    std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  };
  const int rank_;
  std::vector<int> peers_;  // receives[i] is from peers_[i], in rank order
  Round rounds_[2];
  int next_ = 0;
  int waiting_for_ = -1;
};

}  // namespace dtrain
