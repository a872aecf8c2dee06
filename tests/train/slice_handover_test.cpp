// SliceHandover: who computes each slice of each global batch once workers
// are lost. Workers are simulated stepping at different paces, learning of
// each loss a little later as the strategy does; every slice of every batch
// must be computed exactly once.
#include "strategies/parameter_server/slice_handover.h"

#include <doctest/doctest.h>

#include <map>
#include <utility>
#include <vector>

using namespace dtrain;

namespace {

using Slice = std::pair<int64_t, int>;

// One simulated worker: the strategy's order of work for a step of batch b
// (catch up on losses learned, its own slice, the slices it inherited).
struct SimWorker {
  int rank = 0;
  int64_t next = 0;  // the next batch it steps
  int known = 0;     // losses it has learned of
  bool alive = true;
  DoneSlices done;
};

class Simulation {
 public:
  Simulation(int workers, int64_t batches) : handover_(workers), batches_(batches) {
    for (int w = 0; w < workers; ++w) workers_.push_back(SimWorker{w});
  }
  // Worker `w` takes one step (learning of the losses first, as the strategy does at a step's start).
  void step(int w) {
    SimWorker& me = workers_[static_cast<size_t>(w)];
    if (!me.alive || me.next >= batches_) return;
    learn(me, me.next - 1);
    compute(me, me.next, w);
    for (int s : handover_.inherited(w, me.next)) compute(me, me.next, s);
    ++me.next;
  }
  void kill(int w) {
    workers_[static_cast<size_t>(w)].alive = false;
    handover_.lose(w, workers_[static_cast<size_t>(w)].done);
  }
  // Every survivor to the end, then the drain's last catch-up.
  void finish() {
    for (bool any = true; any;) {
      any = false;
      for (SimWorker& me : workers_)
        if (me.alive && me.next < batches_) {
          step(me.rank);
          any = true;
        }
    }
    for (SimWorker& me : workers_)
      if (me.alive) learn(me, batches_ - 1);
  }
  const std::map<Slice, int>& computed() const { return computed_; }
  const SliceHandover& handover() const { return handover_; }

 private:
  void learn(SimWorker& me, int64_t upto) {
    if (me.known == handover_.losses()) return;
    for (const Slice& s : handover_.handedOver(me.rank, me.known, upto)) compute(me, s.first, s.second);
    me.known = handover_.losses();
  }
  void compute(SimWorker& me, int64_t batch, int slice) {
    ++computed_[{batch, slice}];
    if (slice == me.rank)
      me.done.own_upto = batch;
    else
      me.done.others.emplace(batch, slice);
  }
  SliceHandover handover_;
  int64_t batches_;
  std::vector<SimWorker> workers_;
  std::map<Slice, int> computed_;
};

void checkEverySliceOnce(const Simulation& sim, int workers, int64_t batches) {
  CHECK(sim.computed().size() == static_cast<size_t>(workers * batches));
  for (int64_t b = 0; b < batches; ++b)
    for (int s = 0; s < workers; ++s) {
      CAPTURE(b);
      CAPTURE(s);
      auto it = sim.computed().find({b, s});
      REQUIRE(it != sim.computed().end());
      CHECK(it->second == 1);
    }
}

}  // namespace

TEST_CASE("slice handover: without losses each worker computes its own slice") {
  SliceHandover h(3);
  for (int64_t b = 0; b < 10; ++b)
    for (int s = 0; s < 3; ++s) CHECK(h.owner(b, s) == s);
  CHECK(h.inherited(0, 4).empty());
}

TEST_CASE("slice handover: a lost worker's undone slices go to the survivors in turn") {
  SliceHandover h(3);
  DoneSlices done;
  done.own_upto = 4;
  h.lose(1, done);
  CHECK(h.isLost(1));
  for (int64_t b = 0; b <= 4; ++b) CHECK(h.owner(b, 1) == 1);  // done before the loss: nobody again
  int to0 = 0, to2 = 0;
  for (int64_t b = 5; b < 25; ++b) {
    const int o = h.owner(b, 1);
    CHECK((o == 0 || o == 2));
    (o == 0 ? to0 : to2)++;
    CHECK(h.owner(b, 0) == 0);
    CHECK(h.owner(b, 2) == 2);
  }
  CHECK(to0 == 10);  // spread evenly
  CHECK(to2 == 10);
  // A survivor 3 batches further on catches up on its share of batches 5..7.
  const auto caught = h.handedOver(0, 0, 7);
  for (const auto& [b, s] : caught) {
    CHECK(s == 1);
    CHECK(b >= 5);
    CHECK(b <= 7);
    CHECK(h.owner(b, s) == 0);
  }
}

TEST_CASE("slice handover: every slice is computed once through losses at different paces") {
  const int workers = 4;
  const int64_t batches = 40;
  SUBCASE("one loss") {
    Simulation sim(workers, batches);
    for (int round = 0; round < 12; ++round)
      for (int w = 0; w < workers; ++w) sim.step(w);
    sim.step(0);  // the chief a step ahead, worker 3 behind
    sim.kill(2);
    sim.finish();
    checkEverySliceOnce(sim, workers, batches);
  }
  SUBCASE("two losses, the second of a worker that had taken over slices of the first") {
    Simulation sim(workers, batches);
    for (int round = 0; round < 10; ++round)
      for (int w = 0; w < workers; ++w) sim.step(w);
    sim.kill(1);
    for (int round = 0; round < 7; ++round) {
      sim.step(0);
      sim.step(0);  // twice as fast
      sim.step(2);
      if (round % 2 == 0) sim.step(3);
    }
    sim.kill(3);
    sim.finish();
    checkEverySliceOnce(sim, workers, batches);
  }
  SUBCASE("a loss after a worker finished its own batches") {
    Simulation sim(workers, batches);
    for (int round = 0; round < batches; ++round) sim.step(0);
    for (int round = 0; round < 20; ++round)
      for (int w = 1; w < workers; ++w) sim.step(w);
    sim.kill(3);
    sim.finish();
    checkEverySliceOnce(sim, workers, batches);
  }
}

TEST_CASE("slice handover: what a shard publishes reads back, and garbage does not") {
  DoneSlices d;
  d.own_upto = 12;
  d.others = {{3, 1}, {13, 2}};
  DoneSlices back;
  REQUIRE(DoneSlices::parse(d.text(), back));
  CHECK(back.own_upto == 12);
  CHECK(back.others == d.others);
  DoneSlices other;
  other.own_upto = 14;
  other.others = {{20, 1}};
  back.merge(other);
  CHECK(back.own_upto == 14);
  CHECK(back.others.size() == 3);
  CHECK_FALSE(DoneSlices::parse("", back));
  CHECK_FALSE(DoneSlices::parse("7 3-1", back));
  CHECK_FALSE(DoneSlices::parse("7 x:1", back));
}
