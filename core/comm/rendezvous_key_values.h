// RendezvousKeyValues: the coordinator's key-value table for one generation,
// with the reads parked until their keys are set. A parked read answers when
// its last key is set or fails at its deadline; the owner sends the answers.
// Ownership: plain state of the coordinator; not thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm/rendezvous_types.h"
#include "core/comm/store.h"

namespace dtrain {

// A Get (one key, answered with its value) or Wait (answered Ok) that waits
// on the coordinator for its keys.
struct ParkedRead {
  std::string identity;
  uint64_t request_id = 0;
  int rank = -1;
  std::vector<std::string> keys;
  bool wants_value = false;
  std::chrono::milliseconds timeout{0};
  RendezvousClock::time_point deadline;
};

class RendezvousKeyValues {
 public:
  // nullptr when the key is not set.
  const Bytes* find(const std::string& key) const;
  void set(const std::string& key, Bytes value);
  // Adds to the decimal integer at key (0 when unset) and stores the result as
  // decimal text. Throws CommError when the value is not an integer or the sum overflows.
  int64_t add(const std::string& key, int64_t delta);
  // The keys not set yet, in the order given.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

  void park(ParkedRead read);
  // Parked reads whose keys are all set now; they leave the table.
  std::vector<ParkedRead> takeSatisfied();
  // Parked reads past their deadline; they leave the table.
  std::vector<ParkedRead> takeExpired(RendezvousClock::time_point now);
  // Every parked read (the group ended); the table keeps its values.
  std::vector<ParkedRead> takeAll();
  size_t parkedCount() const { return parked_.size(); }

  void clear();

 private:
  std::map<std::string, Bytes> values_;
  std::vector<ParkedRead> parked_;
};

}  // namespace dtrain
