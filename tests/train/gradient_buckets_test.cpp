// Gradient buckets and the overlapped reducer: buckets cover the gradient
// buffer exactly, in the order backward finishes them, and the reducer hands
// each one over only after every replica has finished its layers.
#include "strategies/gradient_buckets.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/nn/layer_registry.h"
#include "core/nn/param_store.h"
#include "models/model_builder.h"
#include "strategies/overlapped_reducer.h"

using namespace dtrain;

namespace {

// mlp 144 -> 64 -> 32 -> 4: nodes flatten(0) fc1(1) relu1(2) fc2(3) relu2(4) fc3(5);
// tensors fc1.weight 9216, fc1.bias 64, fc2.weight 2048, fc2.bias 32, fc3.weight 128, fc3.bias 4 (padded to
// 16).
struct SmallMlp {
  std::unique_ptr<Model> model;
  ParamStore store;
  SmallMlp() {
    ModelSection m;
    m.preset = "mlp";
    m.hidden = {64, 32};
    model = buildModel(m, Shape{1, 12, 12}, 4, builtinLayers());
    model->registerParams(store);
    store.allocate();
  }
  int nodeOf(const std::string& layer) const {
    for (size_t i = 0; i < model->nodes().size(); ++i)
      if (model->nodes()[i].layer->name() == layer) return static_cast<int>(i);
    return -1;
  }
};

void checkCoverage(const std::vector<GradientBucket>& buckets, int64_t size) {
  REQUIRE(!buckets.empty());
  CHECK(buckets.front().end == size);
  CHECK(buckets.back().begin == 0);
  for (size_t b = 0; b + 1 < buckets.size(); ++b) CHECK(buckets[b].begin == buckets[b + 1].end);
  for (const auto& b : buckets) CHECK(b.begin < b.end);
}

}  // namespace

TEST_CASE("gradient buckets: one bucket when everything fits") {
  SmallMlp m;
  auto buckets = planGradientBuckets(*m.model, m.store, 1 << 20, 1 << 20);
  checkCoverage(buckets, m.store.size());
  CHECK(buckets.size() == 1);
  CHECK(buckets[0].ready_after_node == m.nodeOf("fc1"));
}

TEST_CASE("gradient buckets: whole layers, last layers first, the first bucket held small") {
  SmallMlp m;
  const int64_t fc1_w = m.store.find("fc1.weight")->offset, fc2_w = m.store.find("fc2.weight")->offset;
  // 10 KB buckets; first bucket 1 KB: fc3 alone (528 B), then fc2 (8.3 KB), then fc1 (37 KB, alone).
  auto buckets = planGradientBuckets(*m.model, m.store, 10 * 1024, 1024);
  checkCoverage(buckets, m.store.size());
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].ready_after_node == m.nodeOf("fc3"));
  CHECK(buckets[1].ready_after_node == m.nodeOf("fc2"));
  CHECK(buckets[1].begin == fc2_w);
  CHECK(buckets[2].ready_after_node == m.nodeOf("fc1"));
  CHECK(buckets[2].begin == fc1_w);
  // Tiny buckets: one per layer (a bucket never splits a layer).
  auto tiny = planGradientBuckets(*m.model, m.store, 4, 4);
  checkCoverage(tiny, m.store.size());
  CHECK(tiny.size() == 3);
}

TEST_CASE("gradient buckets: the first layers' bucket is held small, for nothing overlaps its reduction") {
  // mlp 144 -> 8 -> 64 -> 64 -> 4: fc1 1,168 floats (with padding), fc2 576, fc3 4,160, fc4 272.
  ModelSection section;
  section.preset = "mlp";
  section.hidden = {8, 64, 64};
  auto model = buildModel(section, Shape{1, 12, 12}, 4, builtinLayers());
  ParamStore store;
  model->registerParams(store);
  store.allocate();
  const int64_t fc2 = store.find("fc2.weight")->offset, fc3 = store.find("fc3.weight")->offset,
                fc4 = store.find("fc4.weight")->offset;
  // 32 KB buckets, 8 KB at either end: fc4 (1 KB) first, and fc3 (16.3 KB)
  // would push it past 8 KB; fc1 and fc2 (6.9 KB) last; fc3 between.
  auto buckets = planGradientBuckets(*model, store, 32 * 1024, 8 * 1024);
  checkCoverage(buckets, store.size());
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].begin == fc4);
  CHECK(buckets[1].begin == fc3);
  CHECK(buckets[1].end == fc4);
  CHECK(buckets[2].begin == 0);
  CHECK(buckets[2].end == fc3);
  CHECK(buckets[2].ready_after_node == 1);  // fc1, after flatten
  // 24 KB caps: fc4, fc3 and fc2 (19.4 KB) fill the first bucket; fc1, the
  // last, is a bucket of its own rather than joining the middle.
  auto wide = planGradientBuckets(*model, store, 24 * 1024, 24 * 1024);
  checkCoverage(wide, store.size());
  REQUIRE(wide.size() == 2);
  CHECK(wide[0].begin == fc2);
  CHECK(wide[1].end == fc2);
}

TEST_CASE("overlapped reducer: buckets reduced in order, each after all replicas finished it") {
  SmallMlp m;
  auto buckets = planGradientBuckets(*m.model, m.store, 4, 4);  // 3 buckets
  const int replicas = 3, nodes = static_cast<int>(m.model->nodes().size());
  std::mutex mu;
  std::vector<int64_t> reduced;
  OverlappedReducer reducer(buckets, replicas, nodes, [&](int64_t begin, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    reduced.push_back(begin);
  });
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    reduced.clear();
    reducer.beginStep();
    std::vector<std::thread> threads;
    for (int r = 0; r < replicas; ++r)
      threads.emplace_back([&, r] {
        for (int i = nodes - 1; i >= 0; --i) {
          std::this_thread::sleep_for(std::chrono::microseconds(100 * (r + 1)));
          reducer.layerDone(i);
        }
      });
    for (auto& t : threads) t.join();
    reducer.finish();
    REQUIRE(reduced.size() == buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) CHECK(reduced[b] == buckets[b].begin);
  }
}

TEST_CASE("overlapped reducer: nothing reduced before the slowest replica reports") {
  SmallMlp m;
  auto buckets = planGradientBuckets(*m.model, m.store, 1 << 20, 1 << 20);  // one bucket
  std::atomic<int> calls{0};
  OverlappedReducer reducer(buckets, 2, static_cast<int>(m.model->nodes().size()),
                            [&](int64_t, int64_t) { ++calls; });
  reducer.beginStep();
  for (int i = static_cast<int>(m.model->nodes().size()) - 1; i >= 0; --i) reducer.layerDone(i);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls.load() == 0);  // the second replica has not reported
  for (int i = static_cast<int>(m.model->nodes().size()) - 1; i >= 0; --i) reducer.layerDone(i);
  reducer.finish();
  CHECK(calls.load() == 1);
}

TEST_CASE("overlapped reducer: a failed reduction is rethrown by finish; cancel ends a broken step") {
  SmallMlp m;
  auto buckets = planGradientBuckets(*m.model, m.store, 4, 4);
  const int nodes = static_cast<int>(m.model->nodes().size());
  int calls = 0;
  OverlappedReducer reducer(buckets, 1, nodes, [&](int64_t, int64_t) {
    if (++calls == 2) throw std::runtime_error("rank 1 is gone");
  });
  reducer.beginStep();
  for (int i = nodes - 1; i >= 0; --i) reducer.layerDone(i);
  CHECK_THROWS_WITH(reducer.finish(), "rank 1 is gone");
  CHECK(calls == 2);  // no collective after the failed one
  // A step whose backward failed half way: cancel returns instead of waiting,
  // and the next step reduces every bucket again.
  reducer.beginStep();
  reducer.layerDone(nodes - 1);
  reducer.cancel();
  calls = 10;  // past the failing call
  reducer.beginStep();
  for (int i = nodes - 1; i >= 0; --i) reducer.layerDone(i);
  reducer.finish();
  CHECK(calls == 10 + static_cast<int>(buckets.size()));
}
