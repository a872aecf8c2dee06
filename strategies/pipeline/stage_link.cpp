#include "strategies/pipeline/stage_link.h"

#include "core/comm/device_groups.h"
#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

// Of a stage's two ends, `before` (to stage - 1) and `after` (to stage + 1),
// the one that reaches `peer`; throws when there is none.
template <typename Pointer>
auto* towards(int stage, int peer, const Pointer& before, const Pointer& after) {
  const Pointer& end = peer == stage - 1 ? before : after;
  if ((peer != stage - 1 && peer != stage + 1) || !end)
    throw Error("pipeline: stage " + std::to_string(stage) + " has no link to stage " + std::to_string(peer));
  return end.get();
}

class GroupLink final : public StageLink {
 public:
  explicit GroupLink(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) override {
    group_->sendAsync(data, bytes, to, tag);
  }
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    group_->recv(data, bytes, from, tag);
  }
  void waitSends() override { group_->waitSends(); }
  std::string describe() const override { return group_->describe(); }

 private:
  std::shared_ptr<ProcessGroup> group_;
};

// Each neighbour pair shares two rings, one per direction: a stage's sends
// to a neighbour are all one direction's (activations on, gradients back).
class SharedMemoryLink final : public StageLink {
 public:
  SharedMemoryLink(Store& store, const std::string& prefix, int stage, int stages, int64_t from_before,
                   int64_t from_after, const std::vector<std::string>& names,
                   std::chrono::milliseconds timeout)
      : stage_(stage) {
    auto key = [&](int from, int to) {
      return prefix + "/" + std::to_string(from) + "-" + std::to_string(to);
    };
    // Every stage makes the rings it reads before opening those it writes.
    if (stage > 0)
      in_before_ =
          ShmChannel::receiver(store, key(stage - 1, stage), from_before, names.at(stage - 1), timeout);
    if (stage + 1 < stages)
      in_after_ =
          ShmChannel::receiver(store, key(stage + 1, stage), from_after, names.at(stage + 1), timeout);
    if (stage > 0)
      out_before_ = ShmChannel::sender(store, key(stage, stage - 1), names.at(stage - 1), timeout);
    if (stage + 1 < stages)
      out_after_ = ShmChannel::sender(store, key(stage, stage + 1), names.at(stage + 1), timeout);
  }
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t) override {
    towards(stage_, to, out_before_, out_after_)->send(data, bytes);
  }
  void recv(void* data, int64_t bytes, int from, uint32_t) override {
    towards(stage_, from, in_before_, in_after_)->recv(data, bytes);
  }
  void waitSends() override {}  // a send has copied its bytes when it returns
  std::string describe() const override { return "shared memory"; }

 private:
  int stage_;
  std::unique_ptr<ShmChannel> in_before_, in_after_, out_before_, out_after_;
};

// Rank 0 of each group sends, rank 1 receives.
class NcclLink final : public StageLink {
 public:
  NcclLink(Store& store, const std::string& prefix, int stage, int stages, Device device,
           std::chrono::milliseconds timeout)
      : stage_(stage) {
    auto pair = [&](int from, int to) {
      return makeNcclGroup(store, from == stage ? 0 : 1, 2, device, timeout,
                           prefix + "/" + std::to_string(from) + "-" + std::to_string(to));
    };
    if (stage > 0) {
      from_before_ = pair(stage - 1, stage);
      to_before_ = pair(stage, stage - 1);
    }
    if (stage + 1 < stages) {
      to_after_ = pair(stage, stage + 1);
      from_after_ = pair(stage + 1, stage);
    }
  }
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) override {
    towards(stage_, to, to_before_, to_after_)->sendAsync(data, bytes, 1, tag);
  }
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    towards(stage_, from, from_before_, from_after_)->recv(data, bytes, 0, tag);
  }
  void waitSends() override {
    if (to_before_) to_before_->waitSends();
    if (to_after_) to_after_->waitSends();
  }
  std::string describe() const override { return "nccl"; }
  bool takesDeviceMemory() const override { return true; }

 private:
  int stage_;
  std::shared_ptr<ProcessGroup> from_before_, to_before_, to_after_, from_after_;
};

}  // namespace

std::unique_ptr<StageLink> ncclLink(Store& store, const std::string& prefix, int stage, int stages,
                                    Device device, std::chrono::milliseconds timeout) {
  return std::make_unique<NcclLink>(store, prefix, stage, stages, device, timeout);
}

std::unique_ptr<StageLink> groupLink(std::shared_ptr<ProcessGroup> group) {
  return std::make_unique<GroupLink>(std::move(group));
}

std::unique_ptr<StageLink> sharedMemoryLink(Store& store, const std::string& prefix, int stage, int stages,
                                            int64_t from_before, int64_t from_after,
                                            const std::vector<std::string>& names,
                                            std::chrono::milliseconds timeout) {
  return std::make_unique<SharedMemoryLink>(store, prefix, stage, stages, from_before, from_after, names,
                                            timeout);
}

}  // namespace dtrain::pipeline
