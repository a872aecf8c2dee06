// InMemoryStore: the Store of one process, for tests and for runs where
// threads play the ranks. Values live in a map guarded by one mutex; get and
// wait sleep on a condition variable until the keys appear or the deadline
// passes, then throw CommError naming the keys still missing.
//
// Thread-safety: every method may be called from any thread at any time.
// add keeps its integer as decimal text, as the rendezvous store does, so a
// key written by add reads the same from either store.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/comm/store.h"

namespace dtrain {

class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;

 private:
  // Waits (mutex held through `lock`) until every key is set; throws on the deadline.
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout, const char* operation);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> values_;
};

}  // namespace dtrain
