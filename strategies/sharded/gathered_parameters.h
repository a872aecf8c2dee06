// Stage 3's parameters (sharded_strategy.h): each worker keeps its shard of
// the flat parameter buffer; the rest of the buffer is resident only while a
// layer group (layer_groups.h) is in use. A communication thread walks each
// pass's groups in the order the model runs them: it all-gathers the next
// group while the layers of the one before compute (prefetched one group
// ahead), and once the compute thread has left a group, releases its pages
// (core/util/process_memory.h) and, in the step's last backward pass,
// reduce-scatters its gradients. The same calls in the same order on every
// worker, whatever the timing: the collectives meet.
//
// A training step of k micro-batches is 2k passes, forward and backward in
// turn. Evaluation and checkpoints read the parameters whole (gatherAll),
// until the next step releases them again (releaseAll).
//
// Threading: beforeNode and afterNode from the thread that runs the model's
// passes (one replica); the rest from the trainer's thread, never while a
// step runs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/comm/process_group.h"
#include "core/nn/parameter_gate.h"
#include "strategies/sharded/layer_groups.h"
#include "strategies/sharded/shard_plan.h"

namespace dtrain {

class GatheredParameters : public ParameterGate {
 public:
  // Reduces the gradients of [begin, end) into the owners' parts (collective).
  using ReduceRange = std::function<void(int64_t begin, int64_t end)>;

  GatheredParameters(ProcessGroup& group, const ShardPlan& plan, float* params, LayerGroups groups,
                     ReduceRange reduce);
  ~GatheredParameters() override;
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

  const LayerGroups& groups() const { return groups_; }
  // Before a training step's passes (releaseAll first if gathered whole).
  void beginStep(int64_t micro_batches);
  void beforeNode(int node, bool backward) override;
  void afterNode(int node, bool backward) override;
  // Waits for the step's last gathers and reductions; rethrows a failure.
  void finish();
  // The step failed before its passes ended: stop waiting for them.
  void cancel();
  // Every parameter in memory (collective), until the next releaseAll.
  void gatherAll();
  // Back to this worker's shard alone.
  void releaseAll();
  bool whole() const { return whole_; }
  // The most bytes of the parameter buffer resident after a gather in the
  // last step (this worker's shard, the groups in use, a tied weight's).
  int64_t peakResidentBytes() const { return peak_resident_; }

 private:
  void run();
  void runPass(int64_t pass, bool backward, bool reduce);
  void gather(const LayerGroup& g);
  void release(const LayerGroup& g);
  // Waits (the mutex held) until `ready` or a failure; throws on failure.
  template <class Pred>
  void waitFor(std::unique_lock<std::mutex>& lock, Pred ready);

  ProcessGroup& group_;
  ShardPlan plan_;
  float* params_;
  LayerGroups groups_;
  ReduceRange reduce_;
  bool whole_ = true;  // every parameter is in memory (as the workers start)
  int64_t peak_resident_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int64_t> ready_;  // per group: the last pass it was gathered for
  std::vector<int64_t> done_;   // per group: the last pass the compute thread left it in
  int64_t next_pass_ = 0;       // the first pass of the next step
  int64_t passes_ = 0;          // this step's: [first_pass_, first_pass_ + passes_)
  int64_t first_pass_ = 0;
  int64_t compute_pass_ = -1;  // the compute thread's pass
  bool compute_backward_ = true;
  bool step_pending_ = false, step_finished_ = true, cancelled_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dtrain
