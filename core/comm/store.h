// A key-value store shared by the ranks of one run: how they exchange
// addresses, digests and Gloo's connection details before (and beside) the
// collectives. The rendezvous client is the real one; InMemoryStore serves
// tests where threads play the ranks.
//
// Every blocking call has a deadline; running past it throws CommError naming
// the keys still missing. Keys are plain strings; implementations namespace
// them (job, generation) so a rerun never reads a stale value.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for the key to be set, up to `timeout`.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer stored at key (0 when unset); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key is set, up to `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // True when the key is set now (does not wait).
  virtual bool check(const std::string& key) = 0;
};

}  // namespace dtrain
