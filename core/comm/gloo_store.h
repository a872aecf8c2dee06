// GlooStore: Gloo's rendezvous::Store over a dtrain::Store. Gloo keeps each
// rank's connection details under the key "<rank>"; this adapter puts them
// under "<prefix>/<rank>" instead, so several groups (and a rerun's group)
// can share one store without reading each other's addresses.
//
// Gloo's store calls have no deadline of their own (get, and wait without a
// timeout); they get `timeout` here, so no rendezvous step can wait forever.
// Errors are the wrapped store's CommError, passed through unchanged.
// Thread-safety: as the wrapped store's.
#pragma once
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/comm/store.h"

namespace dtrain {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `store` must outlive this adapter.
  GlooStore(dtrain::Store& store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The key `key` has in the wrapped store.
  std::string fullKey(const std::string& key) const;

 private:
  std::vector<std::string> fullKeys(const std::vector<std::string>& keys) const;

  dtrain::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dtrain
