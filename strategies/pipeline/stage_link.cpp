#include "strategies/pipeline/stage_link.h"

#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

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
    channel(out_before_, out_after_, to)->send(data, bytes);
  }
  void recv(void* data, int64_t bytes, int from, uint32_t) override {
    channel(in_before_, in_after_, from)->recv(data, bytes);
  }
  void waitSends() override {}  // a send has copied its bytes when it returns
  std::string describe() const override { return "shared memory"; }

 private:
  ShmChannel* channel(const std::unique_ptr<ShmChannel>& before, const std::unique_ptr<ShmChannel>& after,
                      int peer) const {
    const std::unique_ptr<ShmChannel>& c = peer == stage_ - 1 ? before : after;
    if ((peer != stage_ - 1 && peer != stage_ + 1) || !c)
      throw Error("pipeline: stage " + std::to_string(stage_) + " has no link to stage " +
                  std::to_string(peer));
    return c.get();
  }

  int stage_;
  std::unique_ptr<ShmChannel> in_before_, in_after_, out_before_, out_after_;
};

}  // namespace

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
