// Which worker computes each slice of each global batch when workers of an
// asynchronous parameter-server run are lost. Every global batch b (counted
// from 0 over the epochs) is cut into one slice per worker; worker s
// computes slice s. When worker w is lost, the slices it owned and had not
// pushed (what the shards saw applied from it) pass to the survivors in turn,
// so no sample is skipped and none is used twice. Losses are taken in the
// order the rendezvous announced them, so every survivor computes the same
// owners.
//
// Plain state of one worker's strategy; not thread-safe.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// What a lost worker's applied pushes covered (over every shard): its own
// slice of every batch up to `own_upto` (it pushes them in order), and the
// slices it had taken over, by (batch, slice).
struct DoneSlices {
  int64_t own_upto = -1;
  std::set<std::pair<int64_t, int>> others;

  // Adds another shard's account: a push applied on any shard counts as done.
  void merge(const DoneSlices& other);
  // "OWN_UPTO BATCH:SLICE ...", as a shard publishes it; parse() reads it
  // back (false for text that is not of that form).
  std::string text() const;
  static bool parse(const std::string& text, DoneSlices& out);
};

class SliceHandover {
 public:
  explicit SliceHandover(int workers);

  // Worker `worker` was lost, having pushed `done`. Losses of one worker
  // after the first are ignored.
  void lose(int worker, DoneSlices done);
  bool isLost(int worker) const;
  int losses() const { return static_cast<int>(losses_.size()); }

  // The worker that computes slice `slice` of batch `batch` now.
  int owner(int64_t batch, int slice) const;
  // The slices other than its own that `worker` computes in batch `batch`.
  std::vector<int> inherited(int worker, int64_t batch) const;
  // The slices of batches up to `upto` that the losses from `first_loss` on
  // handed to `worker`, by batch: what it must catch up on when it learns of
  // them after its own step of batch `upto`.
  std::vector<std::pair<int64_t, int>> handedOver(int worker, int first_loss, int64_t upto) const;

 private:
  struct Loss {
    int worker;
    DoneSlices done;
    std::vector<int> survivors;  // after this loss, ascending
  };
  // The owner after the first `losses` losses.
  int ownerAfter(int64_t batch, int slice, size_t losses) const;

  int workers_;
  std::vector<Loss> losses_;
};

}  // namespace dtrain
